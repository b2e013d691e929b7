// agree: the check at start-up that every rank of a job was given the same settings
// (include/hw/comm.h, hw_comm_settings_agree).
//
// Without it, `mpirun -np 1 ./hogwild ARGS : -np 1 ./hogwild ARGS --workers 3` trained and printed
// results under a header that said 2 workers per rank while the CSV counted 4; another --data,
// --lr, --batch-size or --sync-every did the same, and another --epochs or --mode waited 60 s for
// a round that never came. Every rank sends all of its settings (MPI_Iallgather: a few KiB), so
// every rank sees every value and fails at the same setting with the same message, and no rank
// is left waiting in a collective.
#include <mpi.h>  // before mpi_side.h, for comm_mpi_wait

#include "hw/comm.h"

#include "mpi_side.h"
#include "hw/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Rank r's setting k in the gathered buffer.
static const hw_comm_setting *setting_of(const hw_comm_setting *all, int n, int rank, int k) {
    return &all[(size_t)rank * (size_t)n + (size_t)k];
}

// "rank 0 has 2, rank 1 has 3": the ranks' values of setting k, the first few distinct ones.
static void list_values(const hw_comm_setting *all, int n, int size, int k, char *text, size_t cap) {
    size_t used = 0;
    int shown = 0;
    text[0] = '\0';
    for (int r = 0; r < size && used < cap; r++) {
        const hw_comm_setting *mine = setting_of(all, n, r, k);
        int seen = 0;  // a value already listed for an earlier rank is not repeated
        for (int q = 0; q < r && !seen; q++) seen = strcmp(setting_of(all, n, q, k)->key, mine->key) == 0;
        if (seen) continue;
        if (shown == 4) {
            used += (size_t)snprintf(text + used, cap - used, ", ...");
            break;
        }
        used += (size_t)snprintf(text + used, cap - used, "%srank %d has %s", shown ? ", " : "", r, mine->shown);
        shown++;
    }
}

int comm_mpi_settings_agree(const hw_comm_setting *settings, int n) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = sizeof(hw_comm_setting) * (size_t)n;
    if (bytes > (size_t)1 << 30) return hw_fail("%d settings are more than one MPI message holds", n);
    hw_comm_setting *all = calloc((size_t)size, bytes);
    if (!all) return hw_fail("out of memory for the settings of %d ranks", size);
    MPI_Request request;
    int code = MPI_Iallgather(settings, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) {
        free(all);
        return comm_mpi_failed(code, "the check of the ranks' settings (MPI_Iallgather)");
    }
    if (comm_mpi_wait(&request, 1, comm_mpi_timeout(), 0, "the check of the ranks' settings") != HW_OK) {
        // Not freed: MPI may still write into it; the job is ending.
        return HW_ERR;
    }
    int status = HW_OK;
    for (int k = 0; k < n && status == HW_OK; k++) {
        for (int r = 1; r < size; r++) {
            const hw_comm_setting *first = setting_of(all, n, 0, k), *other = setting_of(all, n, r, k);
            if (strcmp(first->name, other->name) == 0 && strcmp(first->key, other->key) == 0) continue;
            char values[1024];
            list_values(all, n, size, k, values, sizeof values);
            status = hw_fail("the ranks disagree on %s: %s; every rank of the job must be given the same", first->name,
                             values);
            break;
        }
    }
    free(all);
    return status;
}
