// synth_command: `hogwild synth` (src/cli/data_commands.h), which writes a synthetic dataset
// folder of one of three kinds: the digits (IDX files, a stand-in for MNIST), sparse
// classification with a planted weight vector (train.libsvm, test.libsvm, planted.txt) or
// low-rank ratings (train.tsv, test.tsv). A sparse kind starts from its generator's defaults or
// from a preset (rcv1, netflix) and each flag given replaces one of its settings.
#include "cli/data_commands.h"
#include "cli/options.h"
#include "cli/preflight.h"
#include "cli/usage.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/sparse_data.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *dir, *kind, *preset;
    int64_t n_train, n_test, features, users, items;
    int nnz, rank;
    double zipf, noise, density, sigma, test_share;
    uint64_t seed;
    int overwrite;
} synth_args;

#define FIELD(f) .field = offsetof(synth_args, f)

static const cli_option synth_options[] = {
    {.name = "kind",
     .metavar = "K",
     .kind = CLI_TEXT,
     FIELD(kind),
     .help = "digits (IDX images), sparse (libsvm classification) or ratings (TSV);\n"
             "default digits, or the preset's kind"},
    {.name = "preset",
     .metavar = "P",
     .kind = CLI_TEXT,
     FIELD(preset),
     .help = "rcv1 (sparse, shaped like RCV1) or netflix (ratings, Netflix / 10)"},
    {.name = "dir",
     .metavar = "DIR",
     .kind = CLI_TEXT,
     FIELD(dir),
     .fallback = "data/synthetic",
     .help = "where to write the dataset (default %s)"},
    {.name = "train",
     .metavar = "N",
     .kind = CLI_INT64,
     FIELD(n_train),
     .min = 1,
     .max = 100000000,
     .help = "training examples (digits: default 60000; sparse: 20000)"},
    {.name = "test",
     .metavar = "N",
     .kind = CLI_INT64,
     FIELD(n_test),
     .min = 1,
     .max = 100000000,
     .help = "test examples (digits: default 10000; sparse: 5000)"},
    {.name = "seed",
     .metavar = "S",
     .kind = CLI_UINT64,
     FIELD(seed),
     .min = 0,
     .max = LLONG_MAX,
     .fallback = "1",
     .help = "seed of everything drawn (default %s)"},
    {.name = "overwrite", .kind = CLI_SWITCH, FIELD(overwrite), .help = "replace a dataset already in DIR"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .stops = 1, .help = "this text"},
    {.section = "sparse classification (--kind sparse)",
     .name = "features",
     .metavar = "D",
     .kind = CLI_INT64,
     FIELD(features),
     .min = 1,
     .max = HW_SPARSE_MAX_FEATURES,  // what a libsvm file's dimension taken from the data may be
     .help = "features (default 1000)"},
    {.name = "nnz",
     .metavar = "K",
     .kind = CLI_INT,
     FIELD(nnz),
     .min = 1,
     .max = INT32_MAX,
     .help = "nonzeros per example (default 20)"},
    {.name = "zipf",
     .metavar = "S",
     .kind = CLI_DOUBLE,
     FIELD(zipf),
     .least = 0,
     .help = "exponent of the features' Zipf frequencies, 0 uniform (default 0.5)"},
    {.name = "noise",
     .metavar = "P",
     .kind = CLI_DOUBLE,
     FIELD(noise),
     .least = 0,
     .help = "probability a label is flipped, 0 to 0.5 (default 0.01)"},
    {.section = "ratings (--kind ratings)",
     .name = "users",
     .metavar = "N",
     .kind = CLI_INT64,
     FIELD(users),
     .min = 1,
     .max = UINT32_MAX,
     .help = "users (default 2000)"},
    {.name = "items",
     .metavar = "N",
     .kind = CLI_INT64,
     FIELD(items),
     .min = 1,
     .max = UINT32_MAX,
     .help = "items (default 1000)"},
    {.name = "rank",
     .metavar = "R",
     .kind = CLI_INT,
     FIELD(rank),
     .min = 1,
     .max = 1000,
     .help = "rank of the planted matrix (default 10)"},
    {.name = "density",
     .metavar = "F",
     .kind = CLI_DOUBLE,
     FIELD(density),
     .least = 0,
     .help = "share of the entries observed, (0, 1] (default 0.05)"},
    {.name = "sigma",
     .metavar = "S",
     .kind = CLI_DOUBLE,
     FIELD(sigma),
     .least = 0,
     .help = "standard deviation of the Gaussian noise (default 0.1)"},
    {.name = "test-share",
     .metavar = "F",
     .kind = CLI_DOUBLE,
     FIELD(test_share),
     .least = 0,
     .help = "share of the ratings put in the test set, (0, 1) (default 0.1)"},
};

static const cli_command synth_command = {
    .options = synth_options,
    .n_options = sizeof synth_options / sizeof synth_options[0],
    .missing = "option '%s' needs a value",
    .empty = "option '%s' needs a value",
    .operands = 1,  // refused below: synth takes no name
    .help_column = 19,
};

static const char synth_usage[] =
    "usage: hogwild synth [--kind digits|sparse|ratings] [--preset rcv1|netflix] [--dir DIR] [--seed S]\n"
    "                     [--overwrite] [OPTIONS of the kind]\n"
    "Writes a synthetic dataset with a known truth: digits as IDX files (a stand-in for MNIST offline),\n"
    "sparse classification as train.libsvm, test.libsvm and planted.txt (the planted weights), or\n"
    "low-rank ratings as train.tsv and test.tsv.\n\n";

// Whether the option that sets the field at `offset` was given: a flag replaces the preset's value.
static int given_field(const cli_parsed *parsed, size_t offset) {
    for (int i = 0; i < parsed->n_given; i++) {
        if (parsed->given[i]->field == offset) return 1;
    }
    return 0;
}
#define GIVEN(f) given_field(parsed, offsetof(synth_args, f))

enum { KIND_DIGITS = 1, KIND_SPARSE = 2, KIND_RATINGS = 4 };

// The kinds an option applies to, by the field it sets.
static int field_kinds(size_t field) {
    static const size_t sparse[] = {offsetof(synth_args, features), offsetof(synth_args, nnz),
                                    offsetof(synth_args, zipf), offsetof(synth_args, noise)};
    static const size_t ratings[] = {offsetof(synth_args, users), offsetof(synth_args, items),
                                     offsetof(synth_args, rank),  offsetof(synth_args, density),
                                     offsetof(synth_args, sigma), offsetof(synth_args, test_share)};
    for (size_t k = 0; k < sizeof sparse / sizeof sparse[0]; k++) {
        if (field == sparse[k]) return KIND_SPARSE;
    }
    for (size_t k = 0; k < sizeof ratings / sizeof ratings[0]; k++) {
        if (field == ratings[k]) return KIND_RATINGS;
    }
    // Ratings are as many as the density draws: a count of examples would be a second way to say it.
    if (field == offsetof(synth_args, n_train) || field == offsetof(synth_args, n_test)) {
        return KIND_DIGITS | KIND_SPARSE;
    }
    return KIND_DIGITS | KIND_SPARSE | KIND_RATINGS;
}

// The options of the other kinds are refused, not ignored: --rank on sparse data would do nothing.
static int foreign_refuse(const cli_parsed *parsed, const char *kind, int kind_bit) {
    for (int i = 0; i < parsed->n_given; i++) {
        if (!(field_kinds(parsed->given[i]->field) & kind_bit)) {
            return cli_usage_error("synth: --%s does not apply to --kind %s", parsed->given[i]->name, kind);
        }
    }
    return HW_EXIT_OK;
}

// Settles --kind from --kind and --preset: the preset names its kind, and a --kind beside it must
// be that one. Returns "digits", "sparse" or "ratings", or NULL with the usage error printed.
static const char *kind_settle(const synth_args *args) {
    const char *preset_kind = NULL;
    if (args->preset && strcmp(args->preset, "rcv1") == 0) preset_kind = "sparse";
    if (args->preset && strcmp(args->preset, "netflix") == 0) preset_kind = "ratings";
    if (args->preset && !preset_kind) {
        cli_usage_error("synth: unknown --preset '%s': known are rcv1 (sparse) and netflix (ratings)", args->preset);
        return NULL;
    }
    const char *kind = args->kind ? args->kind : preset_kind ? preset_kind : "digits";
    if (strcmp(kind, "digits") != 0 && strcmp(kind, "sparse") != 0 && strcmp(kind, "ratings") != 0) {
        cli_usage_error("synth: unknown --kind '%s': known are digits, sparse and ratings", kind);
        return NULL;
    }
    if (preset_kind && strcmp(kind, preset_kind) != 0) {
        cli_usage_error("synth: --preset %s makes --kind %s, not %s", args->preset, preset_kind, kind);
        return NULL;
    }
    return kind;
}

static int digits_write(const synth_args *args) {
    int64_t n_train = args->n_train ? args->n_train : 60000, n_test = args->n_test ? args->n_test : 10000;
    if (hw_synth_write(args->dir, n_train, n_test, args->seed) != HW_OK) return cli_failure("hogwild synth");
    printf("wrote synthetic digits (%ld train, %ld test, seed %ld) to %s\n", (long)n_train, (long)n_test,
           (long)args->seed, args->dir);
    return HW_EXIT_OK;
}

static int sparse_write(const synth_args *args, const cli_parsed *parsed) {
    hw_sparse_synth_params p;
    if (args->preset) {
        hw_sparse_synth_rcv1(&p);
    } else {
        hw_sparse_synth_defaults(&p);
    }
    if (GIVEN(n_train)) p.n_train = args->n_train;
    if (GIVEN(n_test)) p.n_test = args->n_test;
    if (GIVEN(features)) p.dim = args->features;
    if (GIVEN(nnz)) p.nnz = args->nnz;
    if (GIVEN(zipf)) p.zipf = args->zipf;
    if (GIVEN(noise)) p.noise = args->noise;
    p.seed = args->seed;
    if (hw_sparse_synth_write(args->dir, &p) != HW_OK) return cli_failure("hogwild synth");
    printf("wrote synthetic sparse classification (%lld train, %lld test, %lld features, %d nonzeros each, zipf %g, "
           "noise %g, seed %llu) to %s\n",
           (long long)p.n_train, (long long)p.n_test, (long long)p.dim, p.nnz, p.zipf, p.noise,
           (unsigned long long)p.seed, args->dir);
    return HW_EXIT_OK;
}

static int ratings_write(const synth_args *args, const cli_parsed *parsed) {
    hw_ratings_synth_params p;
    if (args->preset) {
        hw_ratings_synth_netflix(&p);
    } else {
        hw_ratings_synth_defaults(&p);
    }
    if (GIVEN(users)) p.users = args->users;
    if (GIVEN(items)) p.items = args->items;
    if (GIVEN(rank)) p.rank = args->rank;
    if (GIVEN(density)) p.density = args->density;
    if (GIVEN(sigma)) p.sigma = args->sigma;
    if (GIVEN(test_share)) p.test_share = args->test_share;
    p.seed = args->seed;
    if (hw_ratings_synth_write(args->dir, &p) != HW_OK) return cli_failure("hogwild synth");
    printf("wrote synthetic ratings (%lld users x %lld items, rank %d, density %g, sigma %g, test share %g, seed "
           "%llu) to %s\n",
           (long long)p.users, (long long)p.items, p.rank, p.density, p.sigma, p.test_share, (unsigned long long)p.seed,
           args->dir);
    return HW_EXIT_OK;
}

// A folder that already holds a dataset keeps it unless --overwrite says to replace it: synthetic
// digits written over data/mnist would pass for MNIST in every later run. A dataset of another
// kind is refused even then: the folder would hold two, and --data could not tell which is meant.
static int existing_check(const synth_args *args, const char *kind) {
    const char *idx = preflight_dataset_file_in(args->dir);
    hw_sparse_kind sparse = hw_sparse_dataset_kind(args->dir);
    int same = strcmp(kind, "digits") == 0   ? sparse == HW_SPARSE_NONE
               : strcmp(kind, "sparse") == 0 ? !idx && (sparse == HW_SPARSE_NONE || sparse == HW_SPARSE_LIBSVM)
                                             : !idx && (sparse == HW_SPARSE_NONE || sparse == HW_SPARSE_RATINGS);
    if (!idx && sparse == HW_SPARSE_NONE) return HW_EXIT_OK;
    if (args->overwrite && same) return HW_EXIT_OK;
    fprintf(stderr, "hogwild synth: %s already holds a dataset (%s): %s\n", args->dir,
            idx ? idx : "sparse files, train.libsvm or train.tsv and the like",
            same ? "give --overwrite to replace it, or another --dir" : "remove it first, or give another --dir");
    return HW_EXIT_FAILURE;
}

int cli_synth_run(int argc, char **argv) {
    synth_args args = {0};
    cli_defaults(&synth_command, &args);
    cli_parsed given;
    const cli_parsed *parsed = &given;
    int status = cli_parse(&synth_command, argc, argv, &args, &given);
    const char *stray = given.n_operands > 0 ? given.operands[0] : NULL;
    cli_parsed_free(&given);
    // A number out of range names its flag; anything else is the command's.
    if (status != HW_EXIT_OK && strncmp(given.error, "--", 2) == 0) return cli_usage_error("%s", given.error);
    if (status != HW_EXIT_OK) return cli_usage_error("synth: %s", given.error);
    if (stray) return cli_usage_error("synth: unexpected argument '%s' (it takes no name: --dir DIR)", stray);
    if (given.stop) return cli_command_help_print(&synth_command, synth_usage);
    const char *kind = kind_settle(&args);
    if (!kind) return HW_EXIT_USAGE;
    int digits = strcmp(kind, "digits") == 0, sparse = strcmp(kind, "sparse") == 0;
    status = foreign_refuse(parsed, kind, digits ? KIND_DIGITS : sparse ? KIND_SPARSE : KIND_RATINGS);
    if (status != HW_EXIT_OK) return status;
    status = existing_check(&args, kind);
    if (status != HW_EXIT_OK) return status;
    if (digits) return digits_write(&args);
    return sparse ? sparse_write(&args, parsed) : ratings_write(&args, parsed);
}
