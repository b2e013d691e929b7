// ops: the MPI side's table of calls (src/comm/comm_mpi.h), which door.c looks up by name.
#include "comm_mpi.h"

const comm_ops hw_mpi_ops = {
    .init = comm_mpi_init,
    .settings_agree = comm_mpi_settings_agree,
    .finalize = comm_mpi_finalize,
    .abort = comm_mpi_abort,
    .sum = comm_mpi_sum,
    .sum_polled = comm_mpi_sum_polled,
    .min_int = comm_mpi_min_int,
    .weights_agree = comm_mpi_weights_agree,
    .bcast = comm_mpi_bcast,
    .couple_open = comm_mpi_couple_open,
    .couple_poll = comm_mpi_couple_poll,
    .couple_epoch_agreed = comm_mpi_couple_epoch_agreed,
    .couple_view_read = comm_mpi_couple_view_read,
    .couple_wait = comm_mpi_couple_wait,
    .couple_report = comm_mpi_couple_report,
    .couple_close = comm_mpi_couple_close,
};
