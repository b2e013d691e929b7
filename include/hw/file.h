// file: opening the files hogwild reads, safely: only regular files (a FIFO would block forever,
// /dev/zero would never end), each kind with a documented size limit checked before reading; and
// the checks of the files a command will write, made before it does any work.
#ifndef HW_FILE_H
#define HW_FILE_H

#include <stdint.h>
#include <stdio.h>

// The limits (README.md, "Limits on inputs").
#define HW_MODEL_FILE_MAX_BYTES (1ull << 20)         // a model file: 1 MiB of text
#define HW_IDX_MAX_BYTES        (4ull << 30)         // an IDX file's data, after gunzip: 4 GiB
#define HW_IMAGE_FILE_MAX_BYTES (64ull << 20)        // one image file: 64 MiB
#define HW_IMAGE_MAX_SIDE       4096                 // one image: at most 4096 pixels wide and high ...
#define HW_IMAGE_MAX_PIXELS     (4096ull * 4096ull)  // ... and 16 Mi pixels
#define HW_CSV_MAX_BYTES        (256ull << 20)       // a metrics CSV read by `hogwild compare`: 256 MiB

// Opens `path` for reading if it is a regular file of at most max_bytes (0: no limit), without
// blocking on a FIFO. Returns the descriptor (close-on-exec) and its size in *size (may be NULL);
// -1 after hw_fail naming `what`, the path and the fault.
int hw_open_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size);
// The same as a stdio stream ("rb"); NULL after hw_fail.
FILE *hw_fopen_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size);

// ---- outputs ----
// Whether a and b name the same existing file (device and inode, links followed), so that other
// spellings of a path, and symbolic links, are caught. 0 when either is NULL or does not exist.
int hw_same_file(const char *a, const char *b);
// The folder part of `path` into buf ("." when it has none, "/" for a file at the root).
void hw_path_folder(const char *path, char *buf, size_t cap);
// Checks, before any work, that `path` (given by `flag`, for messages) can be written: a name that
// is not empty, not a folder or special file, in an existing folder that takes a new file of the
// longest name the writer makes there (`path` + ".tmp.<pid>", the checkpoint's temporary file),
// and not an immutable or append-only file. `by_rename`: the writer replaces the file by renaming
// a new one over it (checkpoints), which a sticky folder (/tmp) allows only to the file's owner,
// the folder's owner or a process with CAP_FOWNER; otherwise the file itself must be writable.
int hw_output_check(const char *flag, const char *path, int by_rename);

// ---- one writer per output ----
// Claims `path` (given by `flag`) for this process, so that no two live runs write one output: a
// file in /dev/shm, "hogwild-claim-<device>-<inode of the folder>-<hash of the name>" (other
// spellings of the path and links to its folder are caught), locked with flock and holding the
// claimer's pid. The kernel releases the lock on every exit, SIGKILL included, and on the exit of
// the forked workers that share it; a claim file left by a dead run is not locked and is taken
// over; a normal exit removes it. HW_ERR after hw_fail when another live process holds the claim
// (naming its pid) or the claim cannot be made (ulimit -n); HW_OK, doing nothing, without /dev/shm.
int hw_output_claim(const char *flag, const char *path);

// ---- a file written whole: through a temporary file, renamed into place ----
// The writer of one output file: "<path>.tmp.<pid>" (noted while it exists, so that any exit
// removes it: hw_shm_temp_note) through `f`, renamed over `path` only once all of it is written
// and synced; a failure leaves any previous file at `path` as it was. The first failed write's
// reason (disk full, file size limit) is kept for the message.
typedef struct {
    FILE *f;          // write here between hw_whole_file_open and hw_whole_file_commit
    char path[4096];  // the file's name
    char temp[4096 + 32];
    int fd;
    int error;  // the first failed write's errno (0: none)
} hw_whole_file;
// Creates the temporary file of `path` (described as `what` in messages): HW_OK, or HW_ERR after
// hw_fail.
int hw_whole_file_open(hw_whole_file *w, const char *path, const char *what);
// Ends the writing: when `status` is HW_OK and every write succeeded, syncs the file and renames
// it to its path; otherwise, and on any failure (named with its reason: "cannot write the plot
// x.svg: No space left on device; the previous file, if any, is unchanged"), removes the
// temporary file. Returns HW_OK or HW_ERR; `status` HW_ERR keeps the caller's message.
int hw_whole_file_commit(hw_whole_file *w, int status, const char *what);

#endif
