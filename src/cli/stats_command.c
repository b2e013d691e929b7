// stats_command: `hogwild stats DIR` (src/cli/data_commands.h), the sparsity of a sparse dataset
// folder in the HOGWILD! paper's terms (Omega, Delta, rho; hw_sparse_stats_compute) and its
// nonzeros per example and per feature, for its training set and its test set.
#include "cli/data_commands.h"
#include "cli/options.h"
#include "cli/usage.h"
#include "hw/err.h"
#include "hw/sparse_data.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    int64_t sample;
    uint64_t seed;
} stats_args;

static const cli_option stats_options[] = {
    {.name = "sample",
     .metavar = "N",
     .kind = CLI_INT64,
     .field = offsetof(stats_args, sample),
     .min = 0,
     .max = INT64_MAX,
     .fallback = "5000",
     .help = "rho from N sampled examples when the set has more, 0 exact (default %s)"},
    {.name = "seed",
     .metavar = "S",
     .kind = CLI_UINT64,
     .field = offsetof(stats_args, seed),
     .min = 0,
     .max = LLONG_MAX,
     .fallback = "1",
     .help = "seed of the sample (default %s)"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .stops = 1, .help = "this text"},
};

static const cli_command stats_command = {
    .options = stats_options,
    .n_options = sizeof stats_options / sizeof stats_options[0],
    .missing = "option '%s' needs a value",
    .empty = "option '%s' needs a value",
    .operands = 1,
    .help_column = 19,
};

static const char stats_usage[] =
    "usage: hogwild stats DIR [--sample N] [--seed S]\n"
    "Prints a sparse dataset folder's sparsity as the HOGWILD! paper states its theory in (Niu et al.\n"
    "2011): Omega, the most features one example touches; Delta, the largest share of examples that\n"
    "touch one feature; rho, the largest share of examples that share a feature with one example;\n"
    "then the nonzeros per example and per feature.\n\n";

// The share q of examples that a sampled rho may fall below: with probability 1 - 1e-5 the
// estimate is at least the (1 - q) quantile of the examples' conflict shares, (1 - q)^m = 1e-5.
static double sample_miss_share(int64_t m) { return 1 - pow(1e-5, 1.0 / (double)m); }

static void rho_print(const hw_sparse_stats *s) {
    if (s->rho_exact) {
        printf("  rho   = %.4f  exact, every example counted (example %lld)\n", s->rho, (long long)s->rho_example + 1);
        return;
    }
    printf("  rho  ~= %.4f  sampled from %lld of %lld examples (example %lld): with probability 0.99999 at least\n"
           "                as high as all but %.2f%% of the examples' conflict shares; exact bounds [%.4f, %.4f]\n",
           s->rho, (long long)s->rho_examples, (long long)s->n, (long long)s->rho_example + 1,
           100 * sample_miss_share(s->rho_examples), s->rho_lower, s->rho_upper);
}

static int set_print(const char *name, const hw_sparse_set *set, const stats_args *args) {
    hw_sparse_stats s;
    if (hw_sparse_stats_compute(&s, set, args->sample, args->seed) != HW_OK) return cli_failure("hogwild stats");
    printf("%s (%s): %lld examples, %lld features, %lld nonzeros\n", name, set->source, (long long)s.n,
           (long long)s.dim, (long long)s.nnz);
    printf("  Omega = %lld  (example %lld)\n", (long long)s.omega, (long long)s.omega_example + 1);
    printf("  Delta = %.4f  (feature %lld, in %lld examples)\n", s.delta, (long long)s.delta_feature + 1,
           (long long)s.feature_max);
    rho_print(&s);
    printf("  nonzeros per example: mean %.2f, max %lld\n", s.nnz_per_example_mean, (long long)s.omega);
    printf("  nonzeros per feature: mean %.2f, max %lld, %lld features unused\n", s.nnz_per_feature_mean,
           (long long)s.feature_max, (long long)s.features_unused);
    return HW_EXIT_OK;
}

static const char *kind_name(const hw_sparse_set *set) {
    if (set->n_users > 0) return "ratings";
    return set->label_kind == HW_LABEL_BINARY    ? "binary labels"
           : set->label_kind == HW_LABEL_CLASSES ? "classes"
                                                 : "real labels";
}

int cli_stats_run(int argc, char **argv) {
    stats_args args = {0};
    cli_defaults(&stats_command, &args);
    cli_parsed parsed;
    int status = cli_parse(&stats_command, argc, argv, &args, &parsed);
    if (status != HW_EXIT_OK) {
        cli_parsed_free(&parsed);
        if (strncmp(parsed.error, "--", 2) == 0) return cli_usage_error("%s", parsed.error);
        return cli_usage_error("stats: %s", parsed.error);
    }
    if (parsed.stop) {
        cli_parsed_free(&parsed);
        return cli_command_help_print(&stats_command, stats_usage);
    }
    const char *dir;
    status = cli_one_operand(&parsed, "stats", "dataset folder", "a folder with train.libsvm or train.tsv", &dir);
    cli_parsed_free(&parsed);
    if (status != HW_EXIT_OK) return status;
    hw_sparse_set train, test;
    if (hw_sparse_dataset_open(dir, &train, &test) != HW_OK) return cli_failure("hogwild stats");
    printf("%s: %s", dir, kind_name(&train));
    if (train.n_users > 0) printf(", %lld users and %lld items", (long long)train.n_users, (long long)train.n_items);
    if (train.label_kind == HW_LABEL_CLASSES) printf(", %d classes", train.n_classes);
    printf("\n");
    status = set_print("train", &train, &args);
    if (status == HW_EXIT_OK) status = set_print("test", &test, &args);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    return status;
}
