// evaluate: a model's mean loss and accuracy on a dataset (src/train/evaluate.c).
#ifndef HW_EVALUATE_H
#define HW_EVALUATE_H

#include "hw/data.h"
#include "hw/nn.h"

#include <stdint.h>

// Mean loss and accuracy (percent) of `weights` on a dataset. `ws` is a
// workspace of at least `batch_size`; `x`, `y` buffers of batch_size samples. A stop signal
// (hw_stop_signal, while a run catches them) ends the evaluation between two batches: then
// `interrupted` is set and the numbers are no result. So a test set that takes minutes does not
// hold a stopping run (and its checkpoint) past the stop's grace.
typedef struct {
    double loss;
    double accuracy;
    int interrupted;
    double loss_sum;  // the sums behind them, for an evaluation split over ranks
    int64_t correct;
} hw_eval_result;
hw_eval_result hw_evaluate(const hw_model *model, hw_workspace *ws, const hw_dataset *ds, hw_normalize norm,
                           int batch_size);

#endif
