// sparse_data: sparse examples held in memory once as compressed rows, their readers (libsvm /
// svmlight text; ratings in MovieLens's layouts), the dataset folder that holds them, the
// sparsity statistics of the HOGWILD! paper, and synthetic sets with a known truth.
//
// As with the dense datasets (hw/data.h), the parent loads a set before it forks and the workers
// only read it, so its pages are shared, never copied per worker. A set is four allocations
// (row_start, index, value, label) grown while reading and shrunk to their exact size at the end:
// no allocation per row, and no second copy of the data at any time, so a loaded set's resident
// size is its hw_sparse_set_bytes() plus the reader's buffers while it reads.
#ifndef HW_SPARSE_DATA_H
#define HW_SPARSE_DATA_H

#include <stdint.h>

// What a set's labels are. The readers decide it from the labels they read (hw_libsvm_load says
// the rule); ratings are always HW_LABEL_REAL.
typedef enum {
    HW_LABEL_BINARY = 1,  // stored as -1 and +1, whether the file said -1/+1 or 0/1
    HW_LABEL_CLASSES,     // stored as 0 .. n_classes - 1, the file's own values
    HW_LABEL_REAL,        // regression targets and ratings, as read
} hw_label_kind;

// Compressed rows: example i has the nonzeros index[k], value[k] for k in [row_start[i],
// row_start[i + 1]), with indices 0-based and strictly increasing within a row.
typedef struct {
    int64_t n;           // examples
    int64_t nnz;         // nonzeros stored (an explicit 0 in a file is stored too)
    int64_t dim;         // features: the largest index read + 1, or the dimension given
    int64_t *row_start;  // n + 1
    int32_t *index;      // nnz
    float *value;        // nnz
    float *label;        // n
    hw_label_kind label_kind;
    int n_classes;  // HW_LABEL_CLASSES: the largest label + 1; HW_LABEL_BINARY: 2; HW_LABEL_REAL: 0
    // Ratings (Rendle's factorization-machine encoding): a rating is an example with two
    // nonzeros of value 1, feature `user` and feature `n_users + item`, its label the rating.
    // Both are 0 for other data.
    int64_t n_users, n_items;
    char source[512];  // the file it came from, for messages
} hw_sparse_set;

// Frees the arrays and zeroes the set (a zeroed set may be freed again).
void hw_sparse_set_free(hw_sparse_set *set);
// The bytes the set holds in memory: row_start, index, value and label.
int64_t hw_sparse_set_bytes(const hw_sparse_set *set);

// ---- libsvm / svmlight text ----
// Every reader fails with a message "<file>:<line>:<column>: <fault>" (1-based; the column of
// the bad token) or "<file>: <fault>", and leaves *set empty (nothing to free).
//
// hw_libsvm_load reads `path`, plain or gzip (recognised by its first bytes; a truncated or
// corrupt gzip stream is an error, not a short file). Each line is
//     label [qid:N] index:value index:value ... [# comment]
// fields separated by spaces or tabs, with 1-based indices strictly increasing along the line.
// A '#' starts a comment wherever it is; blank and comment-only lines are skipped; a line of a
// label alone is an example with no nonzeros; "qid:N" (N a decimal integer) is accepted right
// after the label and ignored; a CR before the newline is ignored; lines have no length limit
// below 1 GiB. Numbers are decimal ("-1", "0.5", ".5", "3e-2"); hexadecimal, "inf" and "nan" are
// refused, and so is a value that overflows a float. Errors name the token: a malformed one,
// index 0 or a negative one, an index not above the one before it, an index past `dim` (when dim
// > 0) or past 2^31 - 1, an index past HW_SPARSE_MAX_FEATURES when dim is 0 (the dimension taken
// from the data), a non-finite value; a file with no example at all is refused. A byte no text
// holds (a NUL, a control character other than the blanks, DEL) is refused as binary data,
// naming its line and column, before the line is parsed: "binary data (a NUL byte, 0x00) where
// text was expected: not a text libsvm file".
//
// The labels decide the kind, over all examples read:
//   - every label in {-1, +1}, or every label in {0, 1}: HW_LABEL_BINARY, 0 stored as -1;
//   - else every label a whole number in [0, HW_SPARSE_MAX_CLASSES): HW_LABEL_CLASSES with
//     n_classes = the largest + 1 (a file of classes 1..K gets K + 1 classes, class 0 unused);
//   - else HW_LABEL_REAL (negative or fractional labels, or whole ones past the limit, such as
//     years).
// dim: 0 to take the dimension from the data (the largest index), or the model's dimension, which
// every index must be within.
#define HW_SPARSE_MAX_CLASSES 1000
// The most features a dimension taken from the data may have: 2^26 (67,108,864), above the largest
// of the LIBSVM collection's sets (kdd2012, 54,686,452 features), and 256 MiB per float copy of a
// linear model's weights. A larger index is far more often a stray token than a feature, and would
// size every copy of the model by it; a model file's `input sparse DIM` allows up to 2^31 - 1.
#define HW_SPARSE_MAX_FEATURES (1 << 26)
int hw_libsvm_load(hw_sparse_set *set, const char *path, int64_t dim);
// Writes a set as libsvm text (1-based indices; labels as integers for BINARY and CLASSES, values
// and real labels with 9 significant digits, enough to read the same float back), gzipped when
// the path ends in ".gz". A file that fails half way is removed.
int hw_libsvm_save(const hw_sparse_set *set, const char *path);

// ---- ratings ----
// A rating per line: user, item, rating and an optional fourth field (a timestamp, ignored),
// separated by the layout's separator; spaces around a field are ignored; blank lines are
// skipped. The first line is a header, and skipped, when its rating field is not a number and
// its user or item field is not one either (as MovieLens's ratings.csv has:
// "userId,movieId,rating,timestamp"); a first line of numeric ids and a bad rating is refused as
// a bad rating. Users and items are ids of any
// text, compared as text ("7" and "07" are two users); the rating must be a finite decimal
// number. Plain or gzip, and binary data refused, as hw_libsvm_load.
typedef enum {
    HW_RATINGS_TSV = 1,  // tab-separated (MovieLens 100K's u.data)
    HW_RATINGS_DAT,      // "::"-separated (MovieLens 1M and 10M's ratings.dat)
    HW_RATINGS_CSV,      // comma-separated (MovieLens's ratings.csv; no quoting)
} hw_ratings_layout;
// Reads a training file and, unless test_path is NULL, a test file with the same id maps. Raw ids
// become dense 0-based indices in the order they are first seen in the training file; a user or
// item seen first in the test file (cold start) gets the next index after the training ones, so
// both sets have the same n_users, n_items and dim = n_users + n_items, and a model sized from
// either covers both. The raw ids are not kept: reading the same training file again gives the
// same map.
int hw_ratings_load(hw_sparse_set *train, hw_sparse_set *test, const char *train_path, const char *test_path,
                    hw_ratings_layout layout);

// ---- a sparse dataset folder ----
// The file names that make a folder a sparse dataset, each also read as "<name>.gz":
//   train.libsvm  test.libsvm    libsvm / svmlight text
//   train.tsv     test.tsv       ratings, tab-separated
//   train.dat     test.dat       ratings, "::"-separated
//   train.csv     test.csv       ratings, comma-separated
typedef enum {
    HW_SPARSE_NONE = 0,  // none of the names above
    HW_SPARSE_LIBSVM,
    HW_SPARSE_RATINGS,
    HW_SPARSE_MIXED,  // names of more than one layout: hw_sparse_dataset_open refuses it, naming them
} hw_sparse_kind;
// Which of the names `dir` holds, by looking at the names only (no file is opened): the way for a
// caller to tell a sparse dataset folder from a dense one.
hw_sparse_kind hw_sparse_dataset_kind(const char *dir);
// The name above (plain or ".gz") that `path` has in the folder `dir` (the same folder, however
// spelled), whether or not it exists; NULL when it has none. A file written there would be read as
// the dataset, or destroy it: the check of an output path against a sparse --data folder.
const char *hw_sparse_dataset_name_of(const char *dir, const char *path);
// Opens a folder's training and test files. Both must be there, each as one name (a plain file and
// its ".gz" beside it are refused as ambiguous). The two share the dimension (the larger of the
// two; the test file may hold a feature the training file never had), the label kind (decided
// over both files' labels together) and, for ratings, the id maps. A missing folder or files fail
// with a message naming what was looked for.
int hw_sparse_dataset_open(const char *dir, hw_sparse_set *train, hw_sparse_set *test);
// The same with the model's dimension: every index of either file must be within it (libsvm), or
// it must cover every user and item (ratings); both sets then have dim = `dim`. 0: from the data.
int hw_sparse_dataset_open_dim(const char *dir, int64_t dim, hw_sparse_set *train, hw_sparse_set *test);

// ---- sparsity statistics (Niu, Recht, Re, Wright 2011, section 2) ----
// An example e is the set of coordinates (features) it touches; over the n examples of a set:
//   Omega = max_e |e|, the most coordinates one example touches;
//   Delta = max_v |{e : v in e}| / n, the largest share of examples that touch one coordinate;
//   rho   = max_e |{e' : e' and e share a coordinate}| / n (e itself included), the largest share
//           of examples that one example conflicts with.
// rho >= Delta always (an example holding the busiest coordinate conflicts with every example that
// touches it), so a set cannot have the paper's RCV1 figures, rho = 0.44 with Delta = 1.0.
//
// rho is computed exactly (every example's conflicts counted through posting lists) when
// rho_sample is 0 or n <= rho_sample. Otherwise it is ESTIMATED from rho_sample examples, one
// drawn uniformly (seeded) from each of rho_sample equal runs of consecutive examples: `rho` is
// then the largest exact conflict share among them, which is BIASED LOW (a max over a sample never
// exceeds the max over all). With probability at least 1 - (1 - q)^rho_sample it is at least the
// (1 - q) quantile of all examples' conflict shares (e.g. 2000 examples: with probability 0.99999
// it exceeds all but 0.6% of them). Exact bounds come with it in every case:
//   rho_lower = max(Delta, rho)                       (both attained by some example);
//   rho_upper = max_e min(1, (1 + sum_{v in e} (|{e' : v in e'}| - 1)) / n)  (the union bound),
// computed over every example; for ratings, where an example has two coordinates, the union
// bound is exact unless a (user, item) pair repeats.
typedef struct {
    int64_t n, dim, nnz;
    int64_t omega;                // Omega
    int64_t omega_example;        // an example with Omega nonzeros
    double nnz_per_example_mean;  // nnz / n
    int64_t feature_max;          // the most examples one feature appears in (Delta * n)
    int64_t delta_feature;        // that feature
    double nnz_per_feature_mean;  // nnz / dim, over every feature, those never seen included
    int64_t features_unused;      // features no example touches
    double delta;                 // Delta
    double rho;                   // rho: exact, or the sampled estimate (rho_exact says which)
    int rho_exact;                // 1: every example counted
    int64_t rho_examples;         // examples whose conflicts were counted (n when exact)
    int64_t rho_example;          // the example that reached `rho`
    double rho_lower, rho_upper;  // exact bounds on rho, as above
} hw_sparse_stats;
// Fails only when memory for the posting lists cannot be had (or n >= 2^32, past what they hold).
int hw_sparse_stats_compute(hw_sparse_stats *stats, const hw_sparse_set *set, int64_t rho_sample, uint64_t seed);

// ---- synthetic sparse classification with a planted weight vector ----
// dim features whose frequencies follow a Zipf law: feature of rank k (1 = the most frequent) is
// drawn with probability p_k proportional to 1 / k^zipf; the ranks are given to feature ids by a
// seeded permutation, so frequency does not follow the id. Each example takes `nnz` distinct
// features, drawn one after another from the law over the features not yet drawn (at a cost of
// about nnz draws for sparse rows, at most dim + 2 nnz log2(dim) steps for dense ones), with
// tf-idf-like positive values v = t * log(1 + 1 / p_k), t uniform in [0.5, 1.5], the row then
// scaled to unit length (as RCV1's rows are). The planted weights w* are standard normal; the
// label is sign(w* . x) (+1 on a tie), flipped with probability `noise`. Deterministic in `seed`:
// example i of a set is drawn from its own stream, so a set's first examples do not depend on its
// size and train and test are independent.
typedef struct {
    int64_t n_train, n_test;
    int64_t dim;
    int nnz;       // nonzeros per example, 1 .. dim
    double zipf;   // the exponent s >= 0 (0: uniform)
    double noise;  // the probability that a label is flipped, in [0, 0.5]
    uint64_t seed;
} hw_sparse_synth_params;
// A small planted problem whose weights can be learned (every feature seen often): 20000 train and
// 5000 test examples, 1000 features, 20 nonzeros each, s = 0.5, noise 0.01, seed 1.
void hw_sparse_synth_defaults(hw_sparse_synth_params *p);
// Shaped like RCV1 (rcv1.binary: 47,236 features, about 76 nonzeros per example) at 20,242 train
// and 10,000 test examples, label noise 0.03, with the Zipf exponent (0.45) that puts rho near the
// paper's 0.44. Measured on its training set (exact): Omega = 76, rho = 0.440, Delta = 0.107 (the
// paper's Delta = 1.0 cannot come with rho = 0.44, see the statistics above), rho's union bound
// 0.564, every feature used.
void hw_sparse_synth_rcv1(hw_sparse_synth_params *p);
// Generates both sets in memory (BINARY, dim = p->dim) and, unless `planted` is NULL, the planted
// weights into planted[0 .. dim). Fails on parameters out of range, naming them.
int hw_sparse_synth_generate(const hw_sparse_synth_params *p, hw_sparse_set *train, hw_sparse_set *test,
                             float *planted);
// Writes dir/train.libsvm, dir/test.libsvm and dir/planted.txt (a '#' comment line, then dim lines
// of one weight each, feature 1 first), creating dir. The three are written under temporary names
// and renamed into place only once all are complete: a failure (a full disk) leaves whatever
// dataset was there before whole.
int hw_sparse_synth_write(const char *dir, const hw_sparse_synth_params *p);
// Reads planted.txt as hw_sparse_synth_write wrote it: *w (malloc'ed, the caller frees it) and *dim.
int hw_sparse_planted_load(const char *path, float **w, int64_t *dim);

// ---- synthetic low-rank ratings (HOGWILD!'s "Jumbo" recipe, scaled down) ----
// users x items ratings r = <L_u, R_i> + sigma * N(0, 1), with L and R of rank `rank` whose
// entries are N(0, 1) / rank^(1/4), so that <L_u, R_i> has variance 1 whatever the rank; each entry
// observed with probability `density` (independently), then put in the test set with probability
// `test_share`. Users and items are written with 1-based ids, user-major.
typedef struct {
    int64_t users, items;
    int rank;
    double density;     // (0, 1]
    double sigma;       // noise standard deviation, >= 0
    double test_share;  // [0, 1)
    uint64_t seed;
} hw_ratings_synth_params;
// Rank 10, sigma 0.1, 2000 users x 1000 items, 5% observed, a tenth of them for the test: about
// 90,000 training ratings.
void hw_ratings_synth_defaults(hw_ratings_synth_params *p);
// Netflix's shape scaled down by 10 on each side: 48,019 users x 1,777 items (Netflix's 480,189 x
// 17,770), its density of 1.18% (about 1.0 million ratings), rank 10, sigma 0.5, 10% for test.
void hw_ratings_synth_netflix(hw_ratings_synth_params *p);
// Writes dir/train.tsv and dir/test.tsv (user, item, rating), both renamed into place only once
// both are complete, as hw_sparse_synth_write does.
int hw_ratings_synth_write(const char *dir, const hw_ratings_synth_params *p);

#endif
