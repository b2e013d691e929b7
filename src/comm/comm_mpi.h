// comm_mpi: what the MPI files of src/comm/ share (private to src/comm/).
#ifndef HW_COMM_MPI_H
#define HW_COMM_MPI_H

// Sets the message "rank R: <what> failed: <MPI's text for code>" and returns HW_ERR.
int comm_mpi_failed(int code, const char *what);

#endif
