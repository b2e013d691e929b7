// idx: MNIST's IDX files, gzipped or plain, read (inflate) and written (gzwrite) through zlib.
//
// A header is never trusted with memory: the payload is read in growing chunks, so a header that
// claims 2^31 images costs at most twice the bytes the file really holds before it is refused.
#include "sparse_io.h"

#include "hw/data.h"
#include "hw/err.h"
#include "hw/file.h"
#include "hw/shm.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum {
    IDX_LABELS_MAGIC = 0x801,
    IDX_IMAGES_MAGIC = 0x803,
    IDX_MAX_SIDE = 1 << 15,     // rows and columns beyond this are a broken header, not an image
    IDX_FIRST_CHUNK = 1 << 20,  // the payload buffer starts here and doubles as data arrives
    IDX_GZ_CHUNK = 1 << 30,     // zlib takes unsigned lengths; stay well inside them
};

// One IDX file being read: plain, or gzip inflated here (not through gzread). zlib's gzread takes
// the end of the file for the end of the data once its input is used up, even when the deflate
// stream stopped short of the gzip trailer at a point where the output was full: a file cut by a
// few bytes then read as complete, its CRC and length never checked. Driving inflate directly,
// the end of the data is only ever the end of a gzip member (Z_STREAM_END: trailer checked).
typedef struct {
    int fd;
    const char *path;
    int gzip;          // the file starts with gzip's magic (1f 8b)
    int inflating;     // inflateInit2 was called
    int member_ended;  // inflate reached the end of a member: its CRC and length matched
    int input_eof;     // read(2) has returned 0
    z_stream z;        // next_in/avail_in: read but not yet used input, for plain files too
    unsigned char in[1 << 17];
} idx_stream;

// Refills the input buffer once it is used up; HW_ERR on a read error.
static int stream_fill(idx_stream *s) {
    if (s->z.avail_in > 0 || s->input_eof) return HW_OK;
    ssize_t n;
    do {
        n = read(s->fd, s->in, sizeof s->in);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return hw_fail_errno(errno, "%s: read error", s->path);
    if (n == 0) s->input_eof = 1;
    s->z.next_in = s->in;
    s->z.avail_in = (uInt)n;
    return HW_OK;
}

static void stream_close(idx_stream *s) {
    if (!s) return;
    if (s->inflating) inflateEnd(&s->z);
    if (s->fd >= 0) close(s->fd);
    free(s);
}

static int idx_open(idx_stream **out, const char *path) {
    *out = NULL;
    // A regular file only (a FIFO would block, a device never end); the data's size is bounded
    // by the header's claim, itself bounded by HW_IDX_MAX_BYTES.
    int fd = hw_open_regular(path, "IDX file", 0, NULL);
    if (fd < 0) return HW_ERR;
    idx_stream *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return hw_fail("cannot open %s: out of memory", path);
    }
    s->fd = fd;
    s->path = path;
    // The first bytes say which: gzip's magic, or plain IDX (whose magic starts with 00 00).
    while (s->z.avail_in < 2 && !s->input_eof) {
        ssize_t n = read(fd, s->in + s->z.avail_in, sizeof s->in - s->z.avail_in);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            hw_fail_errno(errno, "%s: read error", path);
            stream_close(s);
            return HW_ERR;
        }
        if (n == 0) s->input_eof = 1;
        s->z.avail_in += (uInt)n;
    }
    s->z.next_in = s->in;
    s->gzip = s->z.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    if (s->gzip) {
        int rc = inflateInit2(&s->z, 15 + 16);  // a gzip wrapper, up to 32 KiB windows
        if (rc != Z_OK) {
            stream_close(s);
            return hw_fail("cannot open %s: %s", path, rc == Z_MEM_ERROR ? "out of memory" : "zlib failed to start");
        }
        s->inflating = 1;
    }
    *out = s;
    return HW_OK;
}

// Up to `want` bytes of a plain file.
static int64_t read_plain(idx_stream *s, uint8_t *buf, uint64_t want) {
    uint64_t got = 0;
    while (got < want) {
        if (stream_fill(s) != HW_OK) return -1;
        if (s->z.avail_in == 0) break;  // the end of the file
        uint64_t n = s->z.avail_in < want - got ? s->z.avail_in : want - got;
        memcpy(buf + got, s->z.next_in, (size_t)n);
        s->z.next_in += n;
        s->z.avail_in -= (uInt)n;
        got += n;
    }
    return (int64_t)got;
}

// Up to `want` bytes of a gzip file's data. The data ends only where a member ends and the input
// with it (members may follow each other, as gzip allows); input that ends inside a member is a
// truncated file, and anything after the last member that is not another one is refused.
static int64_t read_gzip(idx_stream *s, uint8_t *buf, uint64_t want) {
    uint64_t got = 0;
    while (got < want) {
        if (stream_fill(s) != HW_OK) return -1;
        if (s->member_ended) {
            if (s->z.avail_in == 0) break;  // the end of the file after a whole member
            if (s->z.next_in[0] != 0x1f) {
                hw_fail("%s: data after the end of the gzip stream (trailing garbage)", s->path);
                return -1;
            }
            inflateReset(&s->z);  // another member; inflate checks its header
            s->member_ended = 0;
        }
        if (s->z.avail_in == 0) {  // input_eof inside a member
            hw_fail("%s: truncated gzip stream (unexpected end of file)", s->path);
            return -1;
        }
        uint64_t left = want - got;
        s->z.next_out = buf + got;
        s->z.avail_out = (uInt)(left < IDX_GZ_CHUNK ? left : IDX_GZ_CHUNK);
        uInt before = s->z.avail_out;
        int rc = inflate(&s->z, Z_NO_FLUSH);
        got += before - s->z.avail_out;
        if (rc == Z_STREAM_END) {
            s->member_ended = 1;
        } else if (rc == Z_MEM_ERROR) {
            hw_fail("%s: out of memory while decompressing", s->path);
            return -1;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            hw_fail("%s: corrupt gzip data (zlib: %s)", s->path, s->z.msg ? s->z.msg : zError(rc));
            return -1;
        }
    }
    return (int64_t)got;
}

// Reads up to `want` bytes; returns how many were read (fewer at the end of the data) or -1 on an
// error (then the message is set).
static int64_t read_up_to(idx_stream *s, uint8_t *buf, uint64_t want) {
    return s->gzip ? read_gzip(s, buf, want) : read_plain(s, buf, want);
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

// Reads the magic and the n_dims sizes that follow it, and checks the magic.
static int read_header(idx_stream *f, const char *path, uint32_t magic, uint32_t *dims, int n_dims) {
    uint8_t buf[16];
    uint64_t want = 4 * (uint64_t)(1 + n_dims);
    int64_t got = read_up_to(f, buf, want);
    if (got < 0) return HW_ERR;
    if (got == 0) return hw_fail("%s: empty file", path);
    if ((uint64_t)got < want) {
        return hw_fail("%s: file ends inside the IDX header (%lld of %llu bytes)", path, (long long)got,
                       (unsigned long long)want);
    }
    uint32_t found = be32(buf);
    if (found != magic) {
        const char *expected = magic == IDX_IMAGES_MAGIC ? "image" : "label";
        const char *other = found == IDX_IMAGES_MAGIC   ? " (that is an IDX image file)"
                            : found == IDX_LABELS_MAGIC ? " (that is an IDX label file)"
                                                        : "";
        return hw_fail("%s: wrong magic number 0x%08x%s, expected 0x%08x for an IDX %s file", path, found, other, magic,
                       expected);
    }
    for (int i = 0; i < n_dims; i++) dims[i] = be32(buf + 4 + 4 * i);
    return HW_OK;
}

// Reads exactly `want` payload bytes into a new buffer, growing it only as data arrives, then
// checks that the file ends there. `claim` describes the header's promise for messages.
static int read_payload(idx_stream *f, const char *path, uint64_t want, const char *claim, uint8_t **out) {
    *out = NULL;
    uint64_t cap = want < IDX_FIRST_CHUNK ? want : IDX_FIRST_CHUNK;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return hw_fail("%s: out of memory", path);
    uint64_t got = 0;
    for (;;) {
        int64_t n = read_up_to(f, buf + got, cap - got);
        if (n < 0) goto fail;
        got += (uint64_t)n;
        if (got < cap) {
            hw_fail("%s: the header claims %s (%llu bytes of data) but the file holds only %llu", path, claim,
                    (unsigned long long)want, (unsigned long long)got);
            goto fail;
        }
        if (got == want) break;
        // The data is really there (a file that holds less was refused above): a gzip bomb, or
        // a dataset larger than hogwild holds in memory.
        if (got >= HW_IDX_MAX_BYTES) {
            hw_fail("%s: the header claims %s, more than the limit of %llu bytes of data per file", path, claim,
                    HW_IDX_MAX_BYTES);
            goto fail;
        }
        cap = cap > want / 2 ? want : cap * 2;
        if (cap > HW_IDX_MAX_BYTES) cap = HW_IDX_MAX_BYTES;
        uint8_t *bigger = realloc(buf, cap);
        if (!bigger) {
            hw_fail("%s: out of memory for %llu bytes", path, (unsigned long long)cap);
            goto fail;
        }
        buf = bigger;
    }
    // The data must end here; this read also reaches the gzip trailer (CRC, length) and checks it.
    uint8_t extra;
    int64_t n = read_up_to(f, &extra, 1);
    if (n < 0) goto fail;
    if (n > 0) {
        hw_fail("%s: more data after the %s the header claims (wrong count in the header?)", path, claim);
        goto fail;
    }
    *out = buf;
    return HW_OK;
fail:
    free(buf);
    return HW_ERR;
}

// The standard MNIST label file names (also Fashion-MNIST and KMNIST): ten classes, 0-9.
static int is_standard_labels_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "train-labels-idx1-ubyte", 23) == 0 || strncmp(base, "t10k-labels-idx1-ubyte", 22) == 0;
}

int hw_idx_load(hw_dataset *ds, const char *images_path, const char *labels_path) {
    memset(ds, 0, sizeof *ds);
    idx_stream *fi = NULL, *fl = NULL;
    uint8_t *images = NULL, *labels = NULL;
    int rc = HW_ERR;
    uint32_t idims[3] = {0}, ldims[1] = {0};
    if (idx_open(&fi, images_path) != HW_OK) goto done;
    if (read_header(fi, images_path, IDX_IMAGES_MAGIC, idims, 3) != HW_OK) goto done;
    uint32_t n = idims[0], rows = idims[1], cols = idims[2];
    if (n == 0) {
        hw_fail("%s: the header says the file holds no images", images_path);
        goto done;
    }
    if (rows == 0 || cols == 0 || rows > IDX_MAX_SIDE || cols > IDX_MAX_SIDE) {
        hw_fail("%s: implausible image size %u x %u in the header (rows and columns must be 1 to %d)", images_path,
                rows, cols, IDX_MAX_SIDE);
        goto done;
    }
    if (idx_open(&fl, labels_path) != HW_OK) goto done;
    if (read_header(fl, labels_path, IDX_LABELS_MAGIC, ldims, 1) != HW_OK) goto done;
    if (ldims[0] != n) {
        hw_fail("%s holds %u labels but %s holds %u images: the counts must agree", labels_path, ldims[0], images_path,
                n);
        goto done;
    }
    char claim[96];
    snprintf(claim, sizeof claim, "%u images of %u x %u", n, rows, cols);
    // n < 2^32 and rows * cols <= 2^30, so the product fits in 64 bits.
    if (read_payload(fi, images_path, (uint64_t)n * rows * cols, claim, &images) != HW_OK) goto done;
    snprintf(claim, sizeof claim, "%u labels", n);
    if (read_payload(fl, labels_path, n, claim, &labels) != HW_OK) goto done;

    int n_classes = 0;
    if (is_standard_labels_name(labels_path)) {
        n_classes = 10;
        for (uint32_t i = 0; i < n; i++) {
            if (labels[i] >= 10) {
                hw_fail("%s: label %u at index %u is out of range: MNIST-style label files have classes 0-9",
                        labels_path, labels[i], i);
                goto done;
            }
        }
    } else {
        for (uint32_t i = 0; i < n; i++) {
            if (labels[i] + 1 > n_classes) n_classes = labels[i] + 1;
        }
    }
    ds->n = n;
    ds->channels = 1;
    ds->height = (int)rows;
    ds->width = (int)cols;
    ds->n_classes = n_classes;
    ds->images = images;
    ds->labels = labels;
    snprintf(ds->source, sizeof ds->source, "%s", images_path);
    images = labels = NULL;
    rc = HW_OK;
done:
    stream_close(fi);
    stream_close(fl);
    free(images);
    free(labels);
    return rc;
}

static int write_idx_to(const char *path, int gz, uint32_t magic, const uint32_t *dims, int n_dims, const uint8_t *data,
                        uint64_t bytes);

static int ends_with(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

// Writes one IDX file of `set` (its temporary name; file_set_commit renames it): the magic, the
// sizes, the payload. Gzipped when the path ends in .gz.
static int write_idx(file_set *set, const char *path, uint32_t magic, const uint32_t *dims, int n_dims,
                     const uint8_t *data, uint64_t bytes) {
    int slot;
    if (file_set_add(set, path, &slot) != HW_OK) return HW_ERR;
    if (file_set_begin(set, slot) != HW_OK) return HW_ERR;
    int status = write_idx_to(set->temp[slot], ends_with(path, ".gz"), magic, dims, n_dims, data, bytes);
    file_set_end(set, slot);
    return status;
}

// write_idx's file itself, at `path` (the temporary name).
static int write_idx_to(const char *path, int gz, uint32_t magic, const uint32_t *dims, int n_dims, const uint8_t *data,
                        uint64_t bytes) {
    errno = 0;
    gzFile f = gzopen(path, gz ? "wb6" : "wbT");
    if (!f) return errno ? hw_fail_errno(errno, "cannot create %s", path) : hw_fail("cannot create %s", path);
    uint8_t header[16];
    uint32_t fields[4] = {magic, n_dims > 0 ? dims[0] : 0, n_dims > 1 ? dims[1] : 0, n_dims > 2 ? dims[2] : 0};
    for (int i = 0; i <= n_dims; i++) {
        header[4 * i] = (uint8_t)(fields[i] >> 24);
        header[4 * i + 1] = (uint8_t)(fields[i] >> 16);
        header[4 * i + 2] = (uint8_t)(fields[i] >> 8);
        header[4 * i + 3] = (uint8_t)fields[i];
    }
    int ok = gzwrite(f, header, (unsigned)(4 * (n_dims + 1))) == 4 * (n_dims + 1);
    for (uint64_t done = 0; ok && done < bytes;) {
        uint64_t left = bytes - done;
        unsigned chunk = (unsigned)(left < IDX_GZ_CHUNK ? left : IDX_GZ_CHUNK);
        ok = gzwrite(f, data + done, chunk) == (int)chunk;
        done += chunk;
    }
    int saved_errno = errno;
    if (gzclose(f) != Z_OK) ok = 0;
    if (!ok) {
        unlink(path);
        return hw_fail_errno(saved_errno ? saved_errno : EIO, "cannot write %s", path);
    }
    return HW_OK;
}

int idx_save_into(file_set *set, const hw_dataset *ds, const char *images_path, const char *labels_path) {
    if (ds->channels != 1) return hw_fail("%s: IDX holds one channel, the dataset has %d", images_path, ds->channels);
    if (ds->n <= 0 || ds->n > UINT32_MAX || ds->height <= 0 || ds->width <= 0 || ds->height > IDX_MAX_SIDE ||
        ds->width > IDX_MAX_SIDE) {
        return hw_fail("%s: cannot write %lld images of %d x %d as IDX", images_path, (long long)ds->n, ds->height,
                       ds->width);
    }
    uint32_t idims[3] = {(uint32_t)ds->n, (uint32_t)ds->height, (uint32_t)ds->width};
    uint64_t bytes = (uint64_t)ds->n * (uint64_t)ds->height * (uint64_t)ds->width;
    if (write_idx(set, images_path, IDX_IMAGES_MAGIC, idims, 3, ds->images, bytes) != HW_OK) return HW_ERR;
    uint32_t ldims[1] = {(uint32_t)ds->n};
    return write_idx(set, labels_path, IDX_LABELS_MAGIC, ldims, 1, ds->labels, (uint64_t)ds->n);
}

int hw_idx_save(const hw_dataset *ds, const char *images_path, const char *labels_path) {
    file_set set = {0};
    return file_set_commit(&set, idx_save_into(&set, ds, images_path, labels_path));
}
