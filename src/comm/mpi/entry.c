// entry: the MPI side's entry table (src/comm/mpi/mpi_side.h), the one symbol libhogwild-mpi.so
// exports (the version script plugin.map hides every other), which src/comm/mpi_plugin.c looks up.
#include "mpi_side.h"

const comm_ops hw_mpi_plugin = {
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
    .couple_weights = comm_mpi_couple_weights,
    .couple_wait = comm_mpi_couple_wait,
    .couple_report = comm_mpi_couple_report,
    .couple_close = comm_mpi_couple_close,
};
