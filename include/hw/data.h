// data: datasets held in memory once as uint8, the sharding sampler, batches, fetching.
//
// The parent loads a dataset before it forks; workers only read it, so the pages are shared
// copy-on-write and never copied per worker.
#ifndef HW_DATA_H
#define HW_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    int64_t n;          // samples
    int channels;       // 1 for MNIST
    int height, width;  // 28 x 28 for MNIST
    int n_classes;      // 10 for MNIST (max label + 1, or the number of class folders)
    uint8_t *images;    // n * channels * height * width, row-major, sample after sample
    uint8_t *labels;    // n
    char source[512];   // the file or folder it came from, for messages
} hw_dataset;

typedef struct {
    float mean;  // per-pixel value is ((byte / 255) - mean) / std
    float std;
} hw_normalize;

// MNIST's own statistics, the default (torchvision's Normalize((0.1307,), (0.3081,))).
#define HW_MNIST_MEAN 0.1307f
#define HW_MNIST_STD  0.3081f

// ---- readers ----
// Every reader fails with a message "<file>: <fault>" and leaves *ds empty (nothing to free).
//
// One IDX image file and its label file, gzipped or plain (zlib reads both). The header is
// checked against the data actually in the file before anything of the claimed size is
// allocated. n_classes is 10 when the label file has a standard MNIST name (labels must be 0-9),
// otherwise max label + 1.
int hw_idx_load(hw_dataset *ds, const char *images_path, const char *labels_path);
// Writes an IDX pair, gzipped when the path ends in .gz. A file that fails half way is removed.
int hw_idx_save(const hw_dataset *ds, const char *images_path, const char *labels_path);
// torchvision ImageFolder layout: root/<class>/<file>.png|jpg|jpeg|bmp (any case), classes in
// sorted (byte order) name order, files sorted the same way. Names starting with '.' are
// skipped; any other file that is not a decodable image is an error naming it, as is a nested
// folder, a class folder without images, no class folder at all, or more than 256 classes.
// Images are converted to grayscale and resized to height x width by area averaging when
// shrinking and bilinear interpolation when enlarging (pass 0, 0 to keep the first image's
// size and require the others to match).
int hw_image_folder_load(hw_dataset *ds, const char *root, int height, int width);
// A dataset folder: the four MNIST file names (each gzipped or not, .gz preferred when both are
// there), or train/ and test/ image folders (test is resized to the size of the train images,
// and both must have the same class folders). A missing folder fails with a message that
// suggests `hogwild download mnist` and `hogwild synth`.
int hw_dataset_open(const char *dir, hw_dataset *train, hw_dataset *test);
// The same with every image of image folders resized to height x width (--resize; both 0: as
// hw_dataset_open). IDX files hold images of one size already: a size for them is refused.
int hw_dataset_open_resized(const char *dir, int height, int width, hw_dataset *train, hw_dataset *test);
void hw_dataset_free(hw_dataset *ds);
// Mean and standard deviation of all pixels (in [0, 1]) of a dataset.
hw_normalize hw_dataset_stats(const hw_dataset *ds);

// ---- synthetic digits: the offline fallback and the test fixture ----
// Generates n 28x28 ten-class digit images (strokes, affine distortion, noise), deterministic in seed.
int hw_synth_generate(hw_dataset *ds, int64_t n, uint64_t seed);
// Writes train (n_train) and test (n_test) sets as the four gzipped IDX files into dir.
int hw_synth_write(const char *dir, int64_t n_train, int64_t n_test, uint64_t seed);

// ---- sampler: DistributedSampler semantics without padding ----
// A permutation of [0, n) from (seed, epoch) is dealt out round-robin: rank r takes positions
// r, r + replicas, ... Shards are disjoint, cover every index exactly once, change every epoch
// and are the same in every run with the same seed.
int64_t hw_sampler_shard_size(int64_t n, int replicas, int rank);
// Fills out[0 .. shard_size) with this rank's indices for the epoch. Fails on replicas < 1,
// rank outside [0, replicas), n < 0 or when the permutation's scratch memory cannot be allocated.
int hw_sampler_shard(int64_t *out, int64_t n, int replicas, int rank, int epoch, uint64_t seed);

// ---- batches ----
// Normalised floats [count, c*h*w] and labels [count] for the samples at `indices`.
void hw_batch_fill(const hw_dataset *ds, const int64_t *indices, int count, hw_normalize norm, float *x, uint8_t *y);

// Iterates over `indices` in batches of batch_size (the last, partial batch is kept). With
// prefetch = 1 a thread assembles the next batch while the caller trains on the current one
// (two buffers; nothing is allocated per batch). Open it in the process that uses it, i.e. in
// the worker after fork: threads do not survive fork. `indices` is not copied: it must stay
// valid until the pass is over. Fails on an index outside the dataset or a bad batch size.
typedef struct hw_loader hw_loader;
int hw_loader_open(hw_loader **loader, const hw_dataset *ds, const int64_t *indices, int64_t count, int batch_size,
                   hw_normalize norm, int prefetch);
// Points x and y at the next batch and returns its size; 0 when the indices are used up.
// The pointers stay valid until the next call.
int hw_loader_next(hw_loader *loader, const float **x, const uint8_t **y);
// Stops the prefetch thread (also in the middle of a pass), joins it and frees everything.
void hw_loader_close(hw_loader *loader);

// ---- fetching ----
// The names `hogwild download` knows: "mnist", "fashion-mnist"; whether `name` is one of them.
int hw_download_known(const char *name);
// Gets the four files of `name` into dest_dir: first from the local mirror directory in
// $HOGWILD_DATA_MIRROR (laid out as <mirror>/<name>/<file>), then the public mirrors in turn,
// checking each file's md5. Files already present with the right md5 are kept.
// With HOGWILD_DATA_OFFLINE=1 in the environment the public mirrors are not tried.
// Prints one line per file to stdout saying where it came from. All sources failing, the message
// lists what was tried and how to point HOGWILD_DATA_MIRROR at a folder.
int hw_download(const char *name, const char *dest_dir);
// The same with the sources given: mirror_dir (NULL: none), then the base URLs `urls`
// (NULL-terminated; NULL: the built-in public mirrors of `name`; an empty list: none), fetched
// with curl or wget. Progress lines go to `progress` (NULL: quiet).
int hw_download_from(const char *name, const char *dest_dir, const char *mirror_dir, const char *const *urls,
                     FILE *progress);

// Creates dir and its missing parents (mkdir -p); fails naming the part that could not be made.
int hw_mkdir_p(const char *dir);

// ---- md5 (RFC 1321, through libmd), for the downloads ----
// Writes the digest of a file's contents as 32 lowercase hex digits and a NUL into hex; fails
// naming the file when it cannot be read.
int hw_md5_file(const char *path, char hex[33]);

#endif
