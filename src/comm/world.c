// world: MPI_Init, MPI_Finalize and MPI_Abort of a rank of an mpirun job (include/hw/comm.h).
#include "hw/comm.h"

#include "comm_mpi.h"
#include "hw/err.h"

#include <mpi.h>

int comm_mpi_failed(int code, const char *what) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    MPI_Error_string(code, text, &length);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return hw_fail("rank %d: %s failed: %s", rank, what, text);
}

static double job_timeout_s;

double comm_mpi_timeout(void) { return job_timeout_s; }

int comm_mpi_init(const hw_world *world, double timeout_s) {
    job_timeout_s = timeout_s;
    int provided = 0;
    // FUNNELED: DataParallel's replica threads and the Hogwild workers never call MPI; only the
    // thread that initialised it does.
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        return hw_fail("MPI_Init failed on rank %d of %d", world->rank, world->size);
    }
    // Errors come back as codes (then hw_fail names them) rather than ending the process inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != world->rank || size != world->size) {
        return hw_fail("MPI says rank %d of %d, but the environment said rank %d of %d", rank, size, world->rank,
                       world->size);
    }
    return HW_OK;
}

static int initialised(void) {
    int init = 0, final = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&final);
    return init && !final;
}

void comm_mpi_finalize(void) {
    if (initialised()) MPI_Finalize();
}

void comm_mpi_abort(int code) {
    if (initialised()) MPI_Abort(MPI_COMM_WORLD, code);
}
