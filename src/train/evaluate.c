// eval: test loss and accuracy of a set of weights, in test batches, dropout off.
#include "hw/evaluate.h"

#include "hw/signals.h"

#include <stdlib.h>

hw_eval_result hw_evaluate(const hw_model *model, hw_workspace *ws, const hw_dataset *ds, hw_normalize norm,
                           int batch_size) {
    hw_eval_result result = {0};
    if (ds->n == 0) return result;
    int64_t sample_floats = hw_shape_numel(model->input);
    float *x = malloc(sizeof(float) * (size_t)batch_size * (size_t)sample_floats);
    uint8_t *y = malloc((size_t)batch_size);
    int64_t *indices = malloc(sizeof(int64_t) * (size_t)batch_size);
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t start = 0; start < ds->n; start += batch_size) {
        if (hw_stop_signal()) {
            result.interrupted = 1;
            break;
        }
        int count = (int)(ds->n - start < batch_size ? ds->n - start : batch_size);
        for (int i = 0; i < count; i++) indices[i] = start + i;
        hw_batch_fill(ds, indices, count, norm, x, y);
        // forward returns the mean over the batch; PyTorch's test() sums, then divides by N.
        loss_sum += (double)hw_cpu_forward(model, ws, x, y, count, 0) * count;
        correct += hw_model_count_correct(model, ws, y, count);
    }
    free(x);
    free(y);
    free(indices);
    if (result.interrupted) return result;
    result.loss_sum = loss_sum;
    result.correct = correct;
    result.loss = loss_sum / (double)ds->n;
    result.accuracy = 100.0 * (double)correct / (double)ds->n;
    return result;
}
