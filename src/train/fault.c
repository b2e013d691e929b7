// fault: HOGWILD_FAIL_WORKER, the failures the tests inject into Hogwild workers
// (src/train/fault.h).
#include "fault.h"

#include "hw/err.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hw_fault_read(fault_plan *fault) {
    memset(fault, 0, sizeof *fault);
    fault->rank = -1;
    const char *text = getenv("HOGWILD_FAIL_WORKER");
    if (!text) return;
    char mode[16] = "";
    if (sscanf(text, "%d:%d:%15s", &fault->rank, &fault->after_batches, mode) < 2) fault->rank = -1;
    fault->by_abort = strcmp(mode, "abort") == 0;
    fault->by_nan = strcmp(mode, "nan") == 0;
    fault->by_stop = strcmp(mode, "stop") == 0;
}

int hw_fault_check(const fault_plan *fault, int rank, int batches) {
    if (rank != fault->rank || batches != fault->after_batches || fault->by_nan) return HW_OK;
    if (fault->by_abort) abort();
    if (fault->by_stop) return raise(SIGSTOP) == 0 ? HW_OK : hw_fail("raise(SIGSTOP) failed");
    return hw_fail("injected failure after %d batches (HOGWILD_FAIL_WORKER)", batches);
}

int hw_fault_poisons_loss(const fault_plan *fault, int rank, int batch) {
    return fault->by_nan && rank == fault->rank && batch == fault->after_batches;
}
