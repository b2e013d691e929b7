// sparse_loss: the losses of the sparse models on one prediction per example (include/hw/sparse_nn.h).
#include "hw/sparse_nn.h"

#include <math.h>

// log(1 + e^t) without overflow for large t nor loss of precision for very negative t.
static double softplus(double t) { return t > 0 ? t + log1p(exp(-t)) : log1p(exp(t)); }

double hw_sparse_loss_forward(hw_sparse_loss loss, const float *z, const float *y, int batch) {
    double sum = 0.0;
    for (int e = 0; e < batch; e++) {
        double margin = (double)y[e] * (double)z[e], diff = (double)z[e] - (double)y[e];
        switch (loss) {
        case HW_LOSS_LOGISTIC: sum += softplus(-margin); break;
        case HW_LOSS_HINGE: sum += margin < 1.0 ? 1.0 - margin : 0.0; break;
        case HW_LOSS_SQUARED: sum += diff * diff; break;
        }
    }
    return sum / batch;
}

void hw_sparse_loss_backward(hw_sparse_loss loss, float *dz, const float *z, const float *y, int batch) {
    const float scale = 1.0f / (float)batch;
    for (int e = 0; e < batch; e++) {
        float margin = y[e] * z[e];
        switch (loss) {
        // d/dz log(1 + e^(-y z)) = -y / (1 + e^(y z))
        case HW_LOSS_LOGISTIC: dz[e] = -y[e] / (1.0f + expf(margin)) * scale; break;
        case HW_LOSS_HINGE: dz[e] = margin < 1.0f ? -y[e] * scale : 0.0f; break;
        case HW_LOSS_SQUARED: dz[e] = 2.0f * (z[e] - y[e]) * scale; break;
        }
    }
}

int hw_sparse_loss_correct(hw_sparse_loss loss, const float *z, const float *y, int batch) {
    if (loss == HW_LOSS_SQUARED) return 0;
    int correct = 0;
    for (int e = 0; e < batch; e++) correct += (z[e] >= 0.0f ? 1.0f : -1.0f) == y[e];
    return correct;
}
