// detect: who this process is in an mpirun job, from the environment mpirun gives it. No MPI
// call: a Hogwild rank forks its workers before MPI_Init, which starts threads (fork after
// threads is unsafe), so it must know its rank before.
#include "hw/comm.h"

#include "hw/err.h"

#include <errno.h>
#include <stdlib.h>

static int read_env_int(const char *name, int fallback, int min, int *out) {
    const char *text = getenv(name);
    if (!text) {
        *out = fallback;
        return HW_OK;
    }
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < min || value > 1 << 20) {
        return hw_fail("%s is '%s', not a number from %d (is this process really started by mpirun?)", name, text, min);
    }
    *out = (int)value;
    return HW_OK;
}

int hw_world_detect(hw_world *world) {
    *world = (hw_world){0, 1, 0};
    if (read_env_int("OMPI_COMM_WORLD_SIZE", 1, 1, &world->size) != HW_OK ||
        read_env_int("OMPI_COMM_WORLD_RANK", 0, 0, &world->rank) != HW_OK ||
        read_env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, &world->local_rank) != HW_OK) {
        return HW_ERR;
    }
    if (world->rank >= world->size) {
        return hw_fail("OMPI_COMM_WORLD_RANK %d is not below OMPI_COMM_WORLD_SIZE %d", world->rank, world->size);
    }
    return HW_OK;
}
