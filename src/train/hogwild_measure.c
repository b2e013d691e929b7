// hogwild_measure: `--measure`: staleness, lost updates and contention of a CPU Hogwild run (measure.h
// says what each one is and why it is measured so).
#include "hogwild_measure.h"

#include "hw/err.h"
#include "hw/option.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t round_up(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

// The shared region: head, one slot per worker, one buffer of n_weights doubles per worker.
static size_t slots_offset(void) { return round_up(sizeof(measure_shared)); }
static size_t buffers_offset(int workers) { return slots_offset() + sizeof(measure_slot) * (size_t)workers; }
static size_t buffer_bytes(size_t n_weights) { return round_up(sizeof(double) * n_weights); }

static measure_slot *slot_of(measure_shared *shared, int rank) {
    return (measure_slot *)((char *)shared + slots_offset()) + rank;
}

static double *applied_of(measure_shared *shared, int workers, size_t n_weights, int rank) {
    return (double *)((char *)shared + buffers_offset(workers) + buffer_bytes(n_weights) * (size_t)rank);
}

// ---- the parent ----

int measure_open(hw_measure *m, const hw_model *model, int workers, hw_weights_dtype dtype) {
    memset(m, 0, sizeof *m);
    m->workers = workers;
    m->model = model;
    m->dtype = dtype;
    m->lost_total = NAN;
    size_t bytes = buffers_offset(workers) + buffer_bytes(model->n_weights) * (size_t)workers;
    if (hw_shm_open(&m->shm, bytes) != HW_OK) {
        return hw_error_prefix("the measurement of Hogwild's races%s", hw_option_hint(HW_OPTION_MEASURE));
    }
    m->shared = m->shm.data;  // zeroed: every counter and sum starts at 0
    m->initial = malloc(sizeof(float) * model->n_weights);
    m->lost_per_param = malloc(sizeof(double) * (size_t)(model->n_params > 0 ? model->n_params : 1));
    if (!m->initial || !m->lost_per_param) {
        return hw_fail("the measurement of Hogwild's races%s: out of memory for a copy of the weights",
                       hw_option_hint(HW_OPTION_MEASURE));
    }
    memcpy(m->initial, model->weights, sizeof(float) * model->n_weights);
    measure_stats_of(slot_of(m->shared, 0), workers, &m->total);  // no steps yet: nan means
    for (int p = 0; p < model->n_params; p++) m->lost_per_param[p] = NAN;
    return HW_OK;
}

void measure_close(hw_measure *m) {
    hw_shm_close(&m->shm);
    free(m->initial);
    free(m->lost_per_param);
    free(m->coupled);
    m->initial = NULL;
    m->lost_per_param = NULL;
    m->coupled = NULL;
    m->shared = NULL;
}

double *measure_coupled(hw_measure *m) {
    if (!m->coupled) m->coupled = calloc(m->model->n_weights ? m->model->n_weights : 1, sizeof(double));
    if (!m->coupled) {
        hw_fail("the measurement of Hogwild's races%s: out of memory for the coupling's increments",
                hw_option_hint(HW_OPTION_MEASURE));
    }
    return m->coupled;
}

// The smallest staleness s with at least `share` of the counts at or below it.
static int64_t percentile(const int64_t *hist, int64_t total, double share) {
    int64_t need = (int64_t)ceil(share * (double)total), seen = 0;
    if (need < 1) need = 1;
    for (int s = 0; s < STALE_BINS; s++) {
        seen += hist[s];
        if (seen >= need) return s;
    }
    return STALE_EXACT;
}

// The CSV bin of staleness s: 0, 1, then [2^(k-1), 2^k) in bin k, and 1024 or more in the last.
static int csv_bin(int s) {
    int bin = 0;
    while (s > 0 && bin < STALE_CSV_BINS - 1) {
        s >>= 1;
        bin++;
    }
    return bin;
}

void measure_stats_of(const measure_slot *slots, int n_slots, measure_stats *st) {
    memset(st, 0, sizeof *st);
    int64_t hist[STALE_BINS] = {0};
    double stale_sum = 0, us_sum = 0, compute = 0, update = 0, written = 0;
    for (int r = 0; r < n_slots; r++) {
        const measure_slot *slot = &slots[r];
        st->steps += atomic_load_explicit(&slot->steps, memory_order_relaxed);
        st->overlapped += atomic_load_explicit(&slot->overlapped, memory_order_relaxed);
        stale_sum += (double)atomic_load_explicit(&slot->stale_sum, memory_order_relaxed);
        int64_t max = atomic_load_explicit(&slot->stale_max, memory_order_relaxed);
        if (max > st->stale_max) st->stale_max = max;
        us_sum += atomic_load_explicit(&slot->stale_us_sum, memory_order_relaxed);
        double us_max = atomic_load_explicit(&slot->stale_us_max, memory_order_relaxed);
        if (us_max > st->stale_us_max) st->stale_us_max = us_max;
        compute += atomic_load_explicit(&slot->compute_seconds, memory_order_relaxed);
        update += atomic_load_explicit(&slot->update_seconds, memory_order_relaxed);
        written += (double)atomic_load_explicit(&slot->weights_written, memory_order_relaxed);
        for (int s = 0; s < STALE_BINS; s++) {
            hist[s] += atomic_load_explicit(&slot->stale_hist[s], memory_order_relaxed);
        }
    }
    for (int s = 0; s < STALE_BINS; s++) st->csv_hist[csv_bin(s)] += hist[s];
    if (st->steps == 0) {
        st->stale_mean = st->stale_us_mean = st->stale_us_max = NAN;
        st->compute_us_per_step = st->update_us_per_step = NAN;
        return;
    }
    double steps = (double)st->steps;
    st->stale_mean = stale_sum / steps;
    st->stale_us_mean = us_sum / steps;
    st->compute_us_per_step = compute * 1e6 / steps;
    st->update_us_per_step = update * 1e6 / steps;
    st->written_per_update = written / steps;
    // The slots are read while workers may still write them: keep the percentiles consistent
    // with the histogram actually read.
    int64_t counted = 0;
    for (int s = 0; s < STALE_BINS; s++) counted += hist[s];
    st->stale_median = percentile(hist, counted, 0.5);
    st->stale_p99 = percentile(hist, counted, 0.99);
}

// Sums of squares of lost and of applied over [begin, end).
static void lost_sums(const float *initial, const float *final, const double *const *applied, int writers, size_t begin,
                      size_t end, double *lost_sq, double *applied_sq) {
    double lost2 = 0, applied2 = 0;
    for (size_t i = begin; i < end; i++) {
        double sum = 0;
        for (int r = 0; r < writers; r++) sum += applied[r][i];
        double lost = ((double) final[i] - (double)initial[i]) - sum;
        lost2 += lost * lost;
        applied2 += sum * sum;
    }
    *lost_sq += lost2;
    *applied_sq += applied2;
}

static double fraction(double lost_sq, double applied_sq) {
    if (lost_sq == 0) return 0;
    return applied_sq > 0 ? sqrt(lost_sq / applied_sq) : NAN;  // lost, yet nothing applied: no fraction
}

double measure_lost_fraction(const float *initial, const float *final, const double *const *applied, int writers,
                             size_t begin, size_t end) {
    double lost_sq = 0, applied_sq = 0;
    lost_sums(initial, final, applied, writers, begin, end, &lost_sq, &applied_sq);
    return fraction(lost_sq, applied_sq);
}

void measure_capture(hw_measure *m, const float *end_weights) {
    measure_stats_of(slot_of(m->shared, 0), m->workers, &m->total);
    m->lost_total = NAN;
    if (!end_weights) return;
    const hw_model *model = m->model;
    enum { MAX_WORKERS = 1024 };
    const double *applied[MAX_WORKERS + 1];  // the workers', then the coupling's
    int writers = 0;
    for (int r = 0; r < m->workers && r < MAX_WORKERS; r++) {
        applied[writers++] = applied_of(m->shared, m->workers, model->n_weights, r);
    }
    if (m->coupled) applied[writers++] = m->coupled;
    double lost_sq = 0, applied_sq = 0;
    for (int p = 0; p < model->n_params; p++) {
        const hw_param *param = &model->params[p];
        if (param->frozen) continue;
        size_t begin = param->offset, end = begin + (size_t)hw_shape_numel(param->shape);
        double l = 0, a = 0;
        lost_sums(m->initial, end_weights, applied, writers, begin, end, &l, &a);
        m->lost_per_param[p] = fraction(l, a);
        lost_sq += l;
        applied_sq += a;
    }
    m->lost_total = fraction(lost_sq, applied_sq);
}

// A row of no updates (a worker whose share of the training data was empty: more workers than
// examples) has no staleness or time to show: its cells say so with "-", not nan.
static void print_stats_row(hw_progress *progress, const char *who, const measure_stats *st) {
    if (st->steps == 0) {
        hw_progress_message(progress, "  %-7s %9d %8s %6s %6s %6s %10s %10s %10s %10s %10s  (no examples)\n", who, 0,
                            "-", "-", "-", "-", "-", "-", "-", "-", "-");
        return;
    }
    char p99[32], max[32];
    snprintf(p99, sizeof p99, "%s%lld", st->stale_p99 >= STALE_EXACT ? ">=" : "", (long long)st->stale_p99);
    snprintf(max, sizeof max, "%lld", (long long)st->stale_max);
    double overlap = st->steps > 0 ? 100.0 * (double)st->overlapped / (double)st->steps : NAN;
    hw_progress_message(progress, "  %-7s %9lld %8.2f %6lld %6s %6s %10.0f %10.0f %9.1f%% %10.1f %10.1f\n", who,
                        (long long)st->steps, st->stale_mean, (long long)st->stale_median, p99, max, st->stale_us_mean,
                        st->stale_us_max, overlap, st->compute_us_per_step, st->update_us_per_step);
}

void measure_report(const hw_measure *m, hw_progress *progress) {
    hw_progress_message(progress,
                        "measure: staleness = other workers' updates between reading the weights and writing "
                        "the update\n"
                        "  %-7s %9s %8s %6s %6s %6s %10s %10s %10s %10s %10s\n",
                        "worker", "updates", "mean", "median", "p99", "max", "mean us", "max us", "overlap",
                        "fwd+bwd us", "update us");
    for (int r = 0; r < m->workers; r++) {
        measure_stats st;
        measure_stats_of(slot_of(m->shared, r), 1, &st);
        char who[16];
        snprintf(who, sizeof who, "%d", r);
        print_stats_row(progress, who, &st);
    }
    if (m->workers > 1) print_stats_row(progress, "all", &m->total);
    int idle = 0;
    for (int r = 0; r < m->workers; r++) {
        measure_stats st;
        measure_stats_of(slot_of(m->shared, r), 1, &st);
        idle += st.steps == 0;
    }
    if (idle > 0) {
        hw_progress_message(progress,
                            "  %d worker(s) had no examples to train: more workers than training examples leave "
                            "some with an empty share\n",
                            idle);
    }
    hw_progress_message(progress,
                        "  staleness histogram, updates per bin [0] [1] [2,4) [4,8) ... [512,1024) [1024,inf):\n");
    for (int r = 0; r < m->workers; r++) {
        measure_stats st;
        measure_stats_of(slot_of(m->shared, r), 1, &st);
        char line[STALE_CSV_BINS * 22];
        size_t used = 0;
        for (int b = 0; b < STALE_CSV_BINS; b++) {
            used += (size_t)snprintf(line + used, sizeof line - used, " %lld", (long long)st.csv_hist[b]);
        }
        hw_progress_message(progress, "  %-7d%s\n", r, line);
    }
    hw_progress_message(progress,
                        "  lost updates (||(final - initial) - sum of applied increments|| / "
                        "||sum of applied increments||): %.6g%% in total\n",
                        100.0 * m->lost_total);
    size_t trainable = 0;
    for (int p = 0; p < m->model->n_params; p++) {
        if (m->model->params[p].frozen) continue;
        trainable += (size_t)hw_shape_numel(m->model->params[p].shape);
        hw_progress_message(progress, "    %-24s %.6g%%\n", m->model->params[p].name, 100.0 * m->lost_per_param[p]);
    }
    // What one update writes onto the shared weights (and reads): each trainable weight once, or
    // for a sparse step the rows its batch touched (counted by the workers).
    size_t bytes = hw_weights_dtype_bytes(m->dtype);
    double written = m->total.written_per_update;
    if (written > 0) {
        hw_progress_message(progress,
                            "  each update writes %.0f bytes of shared weights on average (the rows its batch "
                            "touched: %.1f of %zu weights, %s: %zu bytes each)\n",
                            written * (double)bytes, written, trainable, hw_weights_dtype_name(m->dtype), bytes);
        return;
    }
    hw_progress_message(
        progress, "  each update writes %zu bytes of shared weights (%zu trainable weights, %s: %zu bytes each)\n",
        trainable * bytes, trainable, hw_weights_dtype_name(m->dtype), bytes);
}

void measure_metrics_values(const hw_measure *m, hw_metrics_measure *values) {
    const measure_stats *st = &m->total;
    hw_metrics_measure_none(values);
    values->updates = st->steps;
    values->staleness_mean = st->stale_mean;
    values->staleness_median = st->stale_median;
    values->staleness_p99 = st->stale_p99;
    values->staleness_max = st->stale_max;
    values->staleness_us_mean = st->stale_us_mean;
    values->staleness_us_max = st->stale_us_max;
    values->overlap_fraction = st->steps > 0 ? (double)st->overlapped / (double)st->steps : NAN;
    values->compute_us_per_step = st->compute_us_per_step;
    values->update_us_per_step = st->update_us_per_step;
    values->lost_fraction = m->lost_total;
    for (int b = 0; b < STALE_CSV_BINS; b++) values->staleness_hist[b] = st->csv_hist[b];
}

// ---- a worker ----

void measure_worker_open(measure_worker *w, hw_measure *m, int rank) {
    memset(w, 0, sizeof *w);
    w->shared = m->shared;
    w->slot = slot_of(m->shared, rank);
    w->applied = applied_of(m->shared, m->workers, m->model->n_weights, rank);
}

void measure_weights_read(measure_worker *w) {
    w->read_update = atomic_load(&w->shared->updates);
    w->read_time = hw_now();
}

// The slot has one writer, this worker: a relaxed load and store, no locked instruction.
static void add_count(atomic_llong *counter, long long by) {
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + by, memory_order_relaxed);
}

static void add_seconds(_Atomic double *sum, double by) {
    atomic_store_explicit(sum, atomic_load_explicit(sum, memory_order_relaxed) + by, memory_order_relaxed);
}

void measure_update_enter(measure_worker *w, measure_mark *mark, double begin) {
    mark->begin = begin;
    mark->entered = atomic_fetch_add(&w->shared->update_entries, 1);
    mark->others_inside = atomic_fetch_add(&w->shared->in_update, 1);
    mark->written = 0;
}

void measure_update_leave(measure_worker *w, const measure_mark *mark) {
    measure_shared *shared = w->shared;
    atomic_fetch_sub(&shared->in_update, 1);
    long long entries_now = atomic_load(&shared->update_entries);
    long long landed = atomic_fetch_add(&shared->updates, 1);  // updates before this one
    double end = hw_now();

    measure_slot *slot = w->slot;
    long long stale = landed - w->read_update;
    double stale_us = (end - w->read_time) * 1e6;
    add_count(&slot->steps, 1);
    if (mark->others_inside > 0 || entries_now - mark->entered > 1) add_count(&slot->overlapped, 1);
    add_count(&slot->stale_sum, stale);
    if (stale > atomic_load_explicit(&slot->stale_max, memory_order_relaxed)) {
        atomic_store_explicit(&slot->stale_max, stale, memory_order_relaxed);
    }
    add_count(&slot->stale_hist[stale < STALE_EXACT ? stale : STALE_EXACT], 1);
    add_seconds(&slot->stale_us_sum, stale_us);
    if (stale_us > atomic_load_explicit(&slot->stale_us_max, memory_order_relaxed)) {
        atomic_store_explicit(&slot->stale_us_max, stale_us, memory_order_relaxed);
    }
    add_seconds(&slot->compute_seconds, mark->begin - w->step_start);
    add_seconds(&slot->update_seconds, end - mark->begin);
    add_count(&slot->weights_written, mark->written);
    // A dense worker's next gradient is on the copy it read in this pass: it has seen every update
    // up to and including its own. (A sparse worker reads the shared weights again at its forward.)
    w->read_update = landed + 1;
    w->read_time = end;
}

int measure_update(measure_worker *w, hogwild_update *update, hw_sgd *opt, const hw_model *model, float *weights,
                   const float *grads, float *copy) {
    double begin = hw_now();
    if (hogwild_update_begin(update) != HW_OK) return HW_ERR;
    measure_mark mark;
    measure_update_enter(w, &mark, begin);
    hogwild_update_write(update, opt, model, weights, grads, copy, w->applied);
    measure_update_leave(w, &mark);
    hogwild_update_end(update);
    return HW_OK;
}
