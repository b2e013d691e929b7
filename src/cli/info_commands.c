// info_commands: --version, --summary, --list-sharing-strategies, --clean-shm (src/cli/info_commands.h).
#include "cli/info_commands.h"
#include "cli/sparse_train_command.h"

#include "cli/options.h"
#include "cli/usage.h"
#include "hw/blas.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_version_print(void) {
    // The CPU kernels first: a HOGWILD_CPU_PATH that is refused ends --version with only the
    // message, not a version and BLAS line that read as a working set-up.
    if (hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) return cli_failure("hogwild");
    printf("hogwild 0.1.0\nBLAS: %s\n", hw_blas_info());
    printf("CPU kernels: %s\n", hw_nn_kernels_info());
    return HW_EXIT_OK;
}

int cli_summary_print(const hw_train_config *config, const cli_parsed *given) {
    // The summary reads the model, --freeze and --data (a sparse model's dimension) alone: a training flag beside it would do nothing,
    // and is refused rather than ignored.
    for (int i = 0; i < given->n_given; i++) {
        hw_option id = given->given[i]->id;
        if (id != HW_OPTION_SUMMARY && id != HW_OPTION_MODEL && id != HW_OPTION_FREEZE && id != HW_OPTION_DATA) {
            return cli_usage_error("--%s does not apply to --summary, which prints the model's layers and parameter "
                                   "counts and trains nothing: drop it",
                                   given->given[i]->name);
        }
    }
    if (cli_sparse_model_is(config->model_path)) return cli_sparse_summary_print(config);
    hw_model model;
    if (hw_model_load(&model, config->model_path) != HW_OK ||
        (config->freeze && hw_model_freeze(&model, config->freeze) != HW_OK)) {
        return cli_failure("hogwild");
    }
    hw_model_summary(&model, stdout);
    hw_model_free(&model);
    return HW_EXIT_OK;
}

int cli_strategies_print(void) {
    int count;
    const char *const *names = hw_sharing_strategies(&count);
    const char *current = hw_sharing_strategy_get();
    for (int i = 0; i < count; i++) printf("%s%s\n", names[i], strcmp(names[i], current) == 0 ? " (current)" : "");
    return HW_EXIT_OK;
}

int cli_shm_clean_run(void) {
    // The count first, then a line per name removed or kept, with the reason.
    int removed = 0;
    char *report = NULL;
    size_t report_size = 0;
    FILE *lines = open_memstream(&report, &report_size);
    int status = hw_shm_clean(lines, &removed);
    if (lines) fclose(lines);
    // Also when a removal failed: what was removed and kept is said all the same.
    printf("removed %d stale shared-memory segment(s) and checkpoint temporary file(s)\n%s", removed,
           report ? report : "");
    free(report);
    if (status != HW_OK) {
        fflush(stdout);
        return cli_failure("hogwild --clean-shm");
    }
    return HW_EXIT_OK;
}
