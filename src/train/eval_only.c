// eval_only: a checkpoint evaluated on the test set, nothing trained (include/hw/eval_only.h).
#include "hw/eval_only.h"

#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/evaluate.h"
#include "hw/nn.h"
#include "hw/run_outputs.h"
#include "hw/signals.h"

#include <math.h>

// The largest |w| of the n weights: in the message about weights that have blown up.
static double largest_magnitude(const float *w, size_t n) {
    double most = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)w[i]) > most) most = fabs((double)w[i]);
    }
    return most;
}

int hw_eval_only_run(const hw_train_config *config, hw_train_inputs *in, hw_eval_only_result *result) {
    hw_ckpt_meta meta;
    hw_workspace ws;
    if (hw_model_alloc_weights(&in->model) != HW_OK ||
        hw_train_load_checkpoint(config->resume_path, &in->model, &meta) != HW_OK ||
        hw_workspace_alloc(&ws, &in->model, config->test_batch_size, config->seed) != HW_OK) {
        return HW_ERR;
    }
    hw_eval_result r = hw_evaluate(&in->model, &ws, &in->test, in->norm, config->test_batch_size);
    hw_workspace_free(&ws);
    if (r.interrupted || hw_stop_signal()) {
        *result = (hw_eval_only_result){.interrupted_by = hw_stop_signal() ? hw_stop_signal() : SIGTERM};
        return HW_OK;
    }
    if (hw_loss_diverged(r.loss)) {
        char loss_text[48];
        hw_loss_describe(loss_text, sizeof loss_text, r.loss);
        return hw_fail("the checkpoint %s gives a test loss of %s on %s: its weights (largest magnitude %.3g) have "
                       "blown up, as a diverged run's do; use an earlier checkpoint",
                       config->resume_path, loss_text, config->data_dir,
                       largest_magnitude(in->model.weights, in->model.n_weights));
    }
    *result = (hw_eval_only_result){meta.epoch, meta.samples_seen, in->test.n, r.loss, r.accuracy, 0};
    return HW_OK;
}
