// none: the cuda module of a build without CUDA (make CUDA=0, or no nvcc found). Every function
// that would need the GPU fails and says why; nothing pretends to work.
#include "hw/cuda.h"

#include "hw/err.h"

#include <string.h>

#define WITHOUT_CUDA "hogwild was built without CUDA (make CUDA=0 or no nvcc)"

static int without_cuda(const char *what) { return hw_fail("%s: %s", what, WITHOUT_CUDA); }

int hw_cuda_compiled(void) { return 0; }

int hw_cuda_device_count(int *count) {
    *count = 0;
    return hw_fail("no CUDA device found: " WITHOUT_CUDA);
}

int hw_cuda_select(hw_device device) {
    char name[32];
    hw_device_format(device, name, sizeof name);
    if (device.type != HW_DEVICE_CUDA) return hw_fail("%s is not a CUDA device (expected cuda or cuda:N)", name);
    return hw_fail("cannot use %s: %s", name, WITHOUT_CUDA);
}

int hw_cuda_mem_info(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    return without_cuda("hw_cuda_mem_info");
}

int hw_cuda_check_shared_use(hw_device device) {
    (void)device;
    return without_cuda("hw_cuda_check_shared_use");
}

int hw_cuda_check_free(size_t bytes) {
    (void)bytes;
    return without_cuda("hw_cuda_check_free");
}

int hw_cuda_describe(hw_device device, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    return hw_cuda_select(device);
}

int hw_cuda_malloc(void **ptr, size_t bytes) {
    (void)bytes;
    *ptr = NULL;
    return without_cuda("hw_cuda_malloc");
}

void hw_cuda_free(void *ptr) { (void)ptr; }

int hw_cuda_memset(void *ptr, int value, size_t bytes, hw_cuda_stream stream) {
    (void)ptr, (void)value, (void)bytes, (void)stream;
    return without_cuda("hw_cuda_memset");
}

int hw_cuda_host_alloc(void **ptr, size_t bytes) {
    (void)bytes;
    *ptr = NULL;
    return without_cuda("hw_cuda_host_alloc");
}

void hw_cuda_host_free(void *ptr) { (void)ptr; }

int hw_cuda_stream_create(hw_cuda_stream *stream) {
    *stream = NULL;
    return without_cuda("hw_cuda_stream_create");
}

void hw_cuda_stream_destroy(hw_cuda_stream stream) { (void)stream; }

int hw_cuda_stream_sync(hw_cuda_stream stream) {
    (void)stream;
    return without_cuda("hw_cuda_stream_sync");
}

int hw_cuda_event_create(hw_cuda_event *event, int timing) {
    (void)timing;
    *event = NULL;
    return without_cuda("hw_cuda_event_create");
}

void hw_cuda_event_destroy(hw_cuda_event event) { (void)event; }

int hw_cuda_event_record(hw_cuda_event event, hw_cuda_stream stream) {
    (void)event, (void)stream;
    return without_cuda("hw_cuda_event_record");
}

int hw_cuda_stream_wait_event(hw_cuda_stream stream, hw_cuda_event event) {
    (void)stream, (void)event;
    return without_cuda("hw_cuda_stream_wait_event");
}

int hw_cuda_event_sync(hw_cuda_event event) {
    (void)event;
    return without_cuda("hw_cuda_event_sync");
}

int hw_cuda_event_elapsed_ms(hw_cuda_event start, hw_cuda_event end, float *ms) {
    (void)start, (void)end;
    *ms = 0.0f;
    return without_cuda("hw_cuda_event_elapsed_ms");
}

int hw_cuda_memcpy_h2d(void *dst_dev, const void *src_host, size_t bytes, hw_cuda_stream stream) {
    (void)dst_dev, (void)src_host, (void)bytes, (void)stream;
    return without_cuda("hw_cuda_memcpy_h2d");
}

int hw_cuda_memcpy_d2h(void *dst_host, const void *src_dev, size_t bytes, hw_cuda_stream stream) {
    (void)dst_host, (void)src_dev, (void)bytes, (void)stream;
    return without_cuda("hw_cuda_memcpy_d2h");
}

int hw_cuda_memcpy_d2d(void *dst_dev, const void *src_dev, size_t bytes, hw_cuda_stream stream) {
    (void)dst_dev, (void)src_dev, (void)bytes, (void)stream;
    return without_cuda("hw_cuda_memcpy_d2d");
}

int hw_cuda_ipc_export(const void *dev_ptr, hw_cuda_ipc_handle *handle) {
    (void)dev_ptr;
    memset(handle, 0, sizeof *handle);
    return without_cuda("hw_cuda_ipc_export");
}

int hw_cuda_ipc_open(const hw_cuda_ipc_handle *handle, void **dev_ptr) {
    (void)handle;
    *dev_ptr = NULL;
    return without_cuda("hw_cuda_ipc_open");
}

int hw_cuda_ipc_close(void *dev_ptr) {
    (void)dev_ptr;
    return without_cuda("hw_cuda_ipc_close");
}

int hw_cublas_create(hw_cublas *handle, hw_cuda_stream stream) {
    (void)stream;
    *handle = NULL;
    return without_cuda("hw_cublas_create");
}

void hw_cublas_destroy(hw_cublas handle) { (void)handle; }

int hw_cuda_sgemm(hw_cublas handle, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  const float *b, float beta, float *c) {
    (void)handle, (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)b, (void)beta,
        (void)c;
    return without_cuda("hw_cuda_sgemm");
}

int hw_cuda_linear_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias, int batch,
                           int in_features, int out_features) {
    (void)ctx, (void)y, (void)x, (void)w, (void)bias, (void)batch, (void)in_features, (void)out_features;
    return without_cuda("hw_cuda_linear_forward");
}

int hw_cuda_linear_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, int batch, int in_features, int out_features) {
    (void)ctx, (void)dx, (void)dw, (void)dbias, (void)dy, (void)x, (void)w, (void)batch, (void)in_features,
        (void)out_features;
    return without_cuda("hw_cuda_linear_backward");
}

int hw_cuda_conv2d_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias,
                           hw_conv_dims d, float *scratch) {
    (void)ctx, (void)y, (void)x, (void)w, (void)bias, (void)d, (void)scratch;
    return without_cuda("hw_cuda_conv2d_forward");
}

int hw_cuda_conv2d_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, hw_conv_dims d, float *scratch) {
    (void)ctx, (void)dx, (void)dw, (void)dbias, (void)dy, (void)x, (void)w, (void)d, (void)scratch;
    return without_cuda("hw_cuda_conv2d_backward");
}

int hw_cuda_maxpool2d_forward(hw_cuda_stream stream, float *y, int32_t *argmax, const float *x, int batch, int channels,
                              int height, int width, int kernel, int stride) {
    (void)stream, (void)y, (void)argmax, (void)x, (void)batch, (void)channels, (void)height, (void)width,
        (void)kernel, (void)stride;
    return without_cuda("hw_cuda_maxpool2d_forward");
}

int hw_cuda_maxpool2d_backward(hw_cuda_stream stream, float *dx, const float *dy, const int32_t *argmax, int batch,
                               int channels, int height, int width, int kernel, int stride) {
    (void)stream, (void)dx, (void)dy, (void)argmax, (void)batch, (void)channels, (void)height, (void)width,
        (void)kernel, (void)stride;
    return without_cuda("hw_cuda_maxpool2d_backward");
}

int hw_cuda_relu_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    (void)stream, (void)y, (void)x, (void)n;
    return without_cuda("hw_cuda_relu_forward");
}

int hw_cuda_relu_backward(hw_cuda_stream stream, float *dx, const float *dy, const float *y, int64_t n) {
    (void)stream, (void)dx, (void)dy, (void)y, (void)n;
    return without_cuda("hw_cuda_relu_backward");
}

int hw_cuda_dropout_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n, float p, uint64_t seed,
                            uint64_t step) {
    (void)stream, (void)y, (void)x, (void)n, (void)p, (void)seed, (void)step;
    return without_cuda("hw_cuda_dropout_forward");
}

int hw_cuda_dropout_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                             uint64_t step) {
    (void)stream, (void)dx, (void)dy, (void)n, (void)p, (void)seed, (void)step;
    return without_cuda("hw_cuda_dropout_backward");
}

int hw_cuda_dropout2d_forward(hw_cuda_stream stream, float *y, const float *x, int64_t planes, int64_t plane,
                              float p, uint64_t seed, uint64_t step) {
    (void)stream, (void)y, (void)x, (void)planes, (void)plane, (void)p, (void)seed, (void)step;
    return without_cuda("hw_cuda_dropout2d_forward");
}

int hw_cuda_dropout2d_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t planes, int64_t plane,
                               float p, uint64_t seed, uint64_t step) {
    (void)stream, (void)dx, (void)dy, (void)planes, (void)plane, (void)p, (void)seed, (void)step;
    return without_cuda("hw_cuda_dropout2d_backward");
}

int hw_cuda_log_softmax_nll_forward(hw_cuda_stream stream, float *logp, float *loss_dev, const float *x,
                                    const uint8_t *labels, int batch, int classes, float *row_scratch) {
    (void)stream, (void)logp, (void)loss_dev, (void)x, (void)labels, (void)batch, (void)classes, (void)row_scratch;
    return without_cuda("hw_cuda_log_softmax_nll_forward");
}

int hw_cuda_log_softmax_nll_backward(hw_cuda_stream stream, float *dx, const float *logp, const uint8_t *labels,
                                     int batch, int classes) {
    (void)stream, (void)dx, (void)logp, (void)labels, (void)batch, (void)classes;
    return without_cuda("hw_cuda_log_softmax_nll_backward");
}

int hw_cuda_accumulate_loss(hw_cuda_stream stream, double *total_dev, const float *loss_dev, int batch) {
    (void)stream, (void)total_dev, (void)loss_dev, (void)batch;
    return without_cuda("hw_cuda_accumulate_loss");
}

int hw_cuda_count_correct(hw_cuda_stream stream, int32_t *count_dev, const float *logp, const uint8_t *labels,
                          int batch, int classes) {
    (void)stream, (void)count_dev, (void)logp, (void)labels, (void)batch, (void)classes;
    return without_cuda("hw_cuda_count_correct");
}

int hw_cuda_sgd_step(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, float lr,
                     float momentum, float weight_decay, int nesterov, int started) {
    (void)stream, (void)w, (void)g, (void)velocity, (void)n, (void)lr, (void)momentum, (void)weight_decay,
        (void)nesterov, (void)started;
    return without_cuda("hw_cuda_sgd_step");
}

int hw_cuda_normalize_u8(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean, float std) {
    (void)stream, (void)x, (void)bytes, (void)n, (void)mean, (void)std;
    return without_cuda("hw_cuda_normalize_u8");
}

int hw_cuda_runner_create(hw_cuda_runner **runner, const hw_model *model, const hw_cuda_runner_config *config) {
    (void)model;
    *runner = NULL;
    return hw_cuda_select(config->device);
}

void hw_cuda_runner_free(hw_cuda_runner *r) { (void)r; }

// No runner can exist in this build (create always fails), so these are never reached with one.
int hw_cuda_runner_upload_u8(hw_cuda_runner *r, const uint8_t *x, const uint8_t *labels, int batch) {
    (void)r, (void)x, (void)labels, (void)batch;
    return without_cuda("hw_cuda_runner_upload_u8");
}

int hw_cuda_runner_upload_f32(hw_cuda_runner *r, const float *x, const uint8_t *labels, int batch) {
    (void)r, (void)x, (void)labels, (void)batch;
    return without_cuda("hw_cuda_runner_upload_f32");
}

int hw_cuda_runner_forward(hw_cuda_runner *r, int training, float *loss) {
    (void)r, (void)training;
    if (loss) *loss = 0.0f;
    return without_cuda("hw_cuda_runner_forward");
}

int hw_cuda_runner_backward(hw_cuda_runner *r) {
    (void)r;
    return without_cuda("hw_cuda_runner_backward");
}

int hw_cuda_runner_sgd_step(hw_cuda_runner *r, float lr, float momentum, float weight_decay, int nesterov) {
    (void)r, (void)lr, (void)momentum, (void)weight_decay, (void)nesterov;
    return without_cuda("hw_cuda_runner_sgd_step");
}

int hw_cuda_runner_count_correct(hw_cuda_runner *r, int *correct) {
    (void)r;
    *correct = 0;
    return without_cuda("hw_cuda_runner_count_correct");
}

int hw_cuda_runner_sync(hw_cuda_runner *r) {
    (void)r;
    return without_cuda("hw_cuda_runner_sync");
}

float *hw_cuda_runner_weights(hw_cuda_runner *r) {
    (void)r;
    return NULL;
}

int hw_cuda_runner_weights_upload(hw_cuda_runner *r, const float *host) {
    (void)r, (void)host;
    return without_cuda("hw_cuda_runner_weights_upload");
}

int hw_cuda_runner_weights_download(hw_cuda_runner *r, float *host) {
    (void)r, (void)host;
    return without_cuda("hw_cuda_runner_weights_download");
}

int hw_cuda_runner_timing(hw_cuda_runner *r, double *copy_ms, double *compute_ms) {
    (void)r;
    *copy_ms = *compute_ms = 0.0;
    return without_cuda("hw_cuda_runner_timing");
}

float *hw_cuda_runner_grads(hw_cuda_runner *r) {
    (void)r;
    return NULL;
}

hw_cuda_stream hw_cuda_runner_stream(hw_cuda_runner *r) {
    (void)r;
    return NULL;
}

int hw_cuda_runner_loss(hw_cuda_runner *r, float *loss) {
    (void)r;
    *loss = 0.0f;
    return without_cuda("hw_cuda_runner_loss");
}

int hw_cuda_runner_train_loss_sum(hw_cuda_runner *r, double *sum) {
    (void)r;
    *sum = 0.0;
    return without_cuda("hw_cuda_runner_train_loss_sum");
}

int hw_cuda_scale(hw_cuda_stream stream, float *x, int64_t n, float alpha) {
    (void)stream, (void)x, (void)n, (void)alpha;
    return without_cuda("hw_cuda_scale");
}

int hw_cuda_add(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    (void)stream, (void)y, (void)x, (void)n;
    return without_cuda("hw_cuda_add");
}

// No all-reduce can exist in this build (create always fails).
int hw_cuda_allreduce_create(hw_cuda_allreduce **ar, const int *devices, int n, size_t count, int allow_nccl) {
    (void)devices, (void)n, (void)count, (void)allow_nccl;
    *ar = NULL;
    return without_cuda("DataParallel on GPUs");
}

void hw_cuda_allreduce_free(hw_cuda_allreduce *ar) { (void)ar; }

int hw_cuda_allreduce_sum(hw_cuda_allreduce *ar, float *const *buffers, const hw_cuda_stream *streams) {
    (void)ar, (void)buffers, (void)streams;
    return without_cuda("hw_cuda_allreduce_sum");
}

const char *hw_cuda_allreduce_method(const hw_cuda_allreduce *ar) {
    (void)ar;
    return "none (built without CUDA)";
}
