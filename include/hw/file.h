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

#endif
