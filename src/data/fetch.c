// fetch: getting MNIST and Fashion-MNIST, md5-checked, from a local mirror or the public ones.
//
// Every file lands first in a temporary file beside its destination and is renamed into place
// only after its md5 matches, so a dataset folder never holds a partial or wrong file under a
// real name. Downloads go through the curl or wget program (whichever is installed) rather than
// a linked HTTP library: both honour the user's proxy settings and certificates.
#include "hw/data.h"
#include "hw/err.h"
#include "hw/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <md5.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int hw_md5_file(const char *path, char hex[33]) {
    FILE *f = fopen(path, "rb");
    if (!f) return hw_fail_errno(errno, "cannot open %s", path);
    MD5_CTX ctx;
    MD5Init(&ctx);
    static _Thread_local uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) MD5Update(&ctx, buf, n);
    int failed = ferror(f), saved_errno = errno;
    fclose(f);
    if (failed) return hw_fail_errno(saved_errno, "cannot read %s", path);
    MD5End(&ctx, hex);  // 32 lowercase hex digits and a NUL
    return HW_OK;
}

enum { N_FILES = 4, MAX_URLS = 4 };

typedef struct {
    const char *name;
    const char *files[N_FILES];
    const char *md5[N_FILES];
    const char *urls[MAX_URLS];  // base URLs, NULL-terminated
} known_dataset;

static const known_dataset known_datasets[] = {
    {"mnist",
     {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
      "t10k-labels-idx1-ubyte.gz"},
     {"f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432", "9fb629c4189551a2d022fa330f9573f3",
      "ec29112dd5afa0611ce80d1b7f02629c"},
     {"https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/", NULL}},
    {"fashion-mnist",
     {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
      "t10k-labels-idx1-ubyte.gz"},
     {"8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe", "bef4ecab320f06d8554ea6380940ec79",
      "bb300cfdad3c16e7a12a480ee83cd310"},
     {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", NULL}},
};

int hw_mkdir_p(const char *dir) {
    char path[1024];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return hw_fail("path too long: %s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) return hw_fail_errno(errno, "cannot create folder %s", path);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
            return hw_fail("cannot create folder %s: a file is in the way", path);
        }
        *p = saved;
        if (saved == '\0') return HW_OK;
    }
}

static void appendf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

// Appends one line "  <source>: <what happened>" to the list of what was tried.
// A long list is cut short at cap: the first sources tried are the ones worth naming.
static void note_tried(char *tried, size_t cap, const char *source, const char *what) {
    size_t used = strlen(tried);
    appendf(tried + used, cap - used, "\n  %s: %s", source, what);
}

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return hw_fail_errno(errno, "cannot open %s", from);
    FILE *out = fopen(to, "wb");
    if (!out) {
        int e = errno;
        fclose(in);
        return hw_fail_errno(e, "cannot create %s", to);
    }
    char buf[1 << 16];
    size_t n;
    int ok = 1;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    int e = errno;
    ok = ok && !ferror(in);
    fclose(in);
    if (fclose(out) != 0) ok = 0;
    return ok ? HW_OK : hw_fail_errno(e ? e : EIO, "cannot copy %s to %s", from, to);
}

// Runs argv[0] found on PATH with its output collected into `output` (the last line kept).
// Returns the exit status, or -1 when it could not be started (*spawn_errno says why).
static int run_program(char *const argv[], char *output, size_t cap, int *spawn_errno) {
    output[0] = '\0';
    *spawn_errno = 0;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        *spawn_errno = errno;
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (err) {
        close(fds[0]);
        *spawn_errno = err;
        return -1;
    }
    // Keep the tail of the output; the last non-empty line is where curl and wget say why.
    char tail[1024];
    size_t used = 0;
    for (;;) {
        if (used == sizeof tail) {
            memmove(tail, tail + sizeof tail / 2, sizeof tail / 2);
            used = sizeof tail / 2;
        }
        ssize_t n = read(fds[0], tail + used, sizeof tail - used);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        used += (size_t)n;
    }
    while (used && (tail[used - 1] == '\n' || tail[used - 1] == '\r')) used--;
    size_t start = used;
    while (start && tail[start - 1] != '\n' && tail[start - 1] != '\r') start--;
    snprintf(output, cap, "%.*s", (int)(used - start), tail + start);
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            *spawn_errno = errno;
            return -1;
        }
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Downloads url into path with curl, or wget when curl is not installed. On failure `why` says
// what went wrong.
static int download(const char *url, const char *path, char *why, size_t cap) {
    char *curl[] = {"curl", "--fail",     "--silent", "--show-error", "--location", "--connect-timeout",
                    "20",   "--max-time", "900",      "--output",     (char *)path, (char *)url,
                    NULL};
    char *wget[] = {"wget",       "--no-verbose", "--tries=1", "--timeout=20", "--output-document",
                    (char *)path, (char *)url,    NULL};
    char *const *programs[2] = {curl, wget};
    char output[256];
    for (int i = 0; i < 2; i++) {
        int spawn_errno;
        int status = run_program(programs[i], output, sizeof output, &spawn_errno);
        if (status == 0) return HW_OK;
        if (status > 0) {
            snprintf(why, cap, "%s failed (exit %d)%s%s", programs[i][0], status, output[0] ? ": " : "", output);
            return HW_ERR;
        }
        if (spawn_errno != ENOENT) {
            snprintf(why, cap, "cannot run %s: %s", programs[i][0], strerror(spawn_errno));
            return HW_ERR;
        }
    }
    snprintf(why, cap, "neither curl nor wget is installed");
    return HW_ERR;
}

// Checks a fetched temporary file and moves it into place, or removes it and says why not.
static int accept_file(const char *tmp, const char *path, const char *expected, char *why, size_t cap) {
    char md5[33];
    if (hw_md5_file(tmp, md5) != HW_OK) {
        snprintf(why, cap, "%s", hw_error());
    } else if (strcmp(md5, expected) != 0) {
        snprintf(why, cap, "md5 mismatch (got %s, expected %s)", md5, expected);
    } else if (rename(tmp, path) != 0) {
        snprintf(why, cap, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    } else {
        return HW_OK;
    }
    unlink(tmp);
    return HW_ERR;
}

static int fetch_one(const known_dataset *set, int f, const char *dest_dir, const char *mirror_dir,
                     const char *const *urls, FILE *progress) {
    const char *file = set->files[f], *expected = set->md5[f];
    char path[1024], tmp[1100], source[2048], why[512], md5[33];
    snprintf(path, sizeof path, "%s/%s", dest_dir, file);
    if (access(path, F_OK) == 0) {
        if (hw_md5_file(path, md5) != HW_OK) return HW_ERR;
        if (strcmp(md5, expected) == 0) {
            if (progress) fprintf(progress, "%s: already present (md5 ok)\n", path);
            return HW_OK;
        }
        if (progress) {
            fprintf(progress, "%s: present but its md5 is %s, not %s; fetching it again\n", path, md5, expected);
        }
    }
    char tried[1024] = "";
    int n_sources = 0;
    // The temporary file is noted (src/proc/shm.c) while it exists: Ctrl-C or any other deadly signal
    // removes it, and --clean-shm finds it after a SIGKILL (it ends with ".tmp.<pid>", as they must).
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (mirror_dir) {
        n_sources++;
        snprintf(source, sizeof source, "%s/%s/%s", mirror_dir, set->name, file);
        int noted = hw_shm_temp_note(tmp) == HW_OK;
        int status = HW_ERR;
        if (access(source, R_OK) != 0) {
            note_tried(tried, sizeof tried, source, strerror(errno));
        } else if (copy_file(source, tmp) != HW_OK) {
            unlink(tmp);
            note_tried(tried, sizeof tried, source, hw_error());
        } else if (accept_file(tmp, path, expected, why, sizeof why) != HW_OK) {
            note_tried(tried, sizeof tried, source, why);
        } else {
            if (progress) fprintf(progress, "%s: copied from %s (md5 ok)\n", path, source);
            status = HW_OK;
        }
        if (noted) hw_shm_temp_forget();
        if (status == HW_OK) return HW_OK;
    }
    for (int u = 0; urls[u]; u++) {
        n_sources++;
        snprintf(source, sizeof source, "%s%s", urls[u], file);
        int noted = hw_shm_temp_note(tmp) == HW_OK;
        int status = HW_ERR;
        if (download(source, tmp, why, sizeof why) != HW_OK) {
            unlink(tmp);
            note_tried(tried, sizeof tried, source, why);
        } else if (accept_file(tmp, path, expected, why, sizeof why) != HW_OK) {
            note_tried(tried, sizeof tried, source, why);
        } else {
            if (progress) fprintf(progress, "%s: downloaded from %s (md5 ok)\n", path, source);
            status = HW_OK;
        }
        if (noted) hw_shm_temp_forget();
        if (status == HW_OK) return HW_OK;
    }
    if (n_sources == 0) tried[0] = '\0';
    return hw_fail("could not get %s %s into %s; tried:%s\nPoint HOGWILD_DATA_MIRROR at a folder that holds "
                   "%s/%s (the original gzipped files) to use a local copy",
                   set->name, file, dest_dir, n_sources ? tried : " nothing (no mirror folder, public mirrors off)",
                   set->name, file);
}

static const known_dataset *find_known(const char *name) {
    for (size_t i = 0; i < sizeof known_datasets / sizeof known_datasets[0]; i++) {
        if (strcmp(known_datasets[i].name, name) == 0) return &known_datasets[i];
    }
    return NULL;
}

int hw_download_known(const char *name) { return find_known(name) != NULL; }

int hw_download_from(const char *name, const char *dest_dir, const char *mirror_dir, const char *const *urls,
                     FILE *progress) {
    const known_dataset *set = find_known(name);
    if (!set) return hw_fail("unknown dataset '%s' (known: mnist, fashion-mnist)", name);
    if (!urls) urls = set->urls;
    if (hw_mkdir_p(dest_dir) != HW_OK) return HW_ERR;
    for (int f = 0; f < N_FILES; f++) {
        if (fetch_one(set, f, dest_dir, mirror_dir, urls, progress) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

int hw_download(const char *name, const char *dest_dir) {
    const char *mirror = getenv("HOGWILD_DATA_MIRROR");
    if (mirror && !mirror[0]) mirror = NULL;
    const char *offline = getenv("HOGWILD_DATA_OFFLINE");
    static const char *const no_urls[] = {NULL};
    const char *const *urls = offline && offline[0] && strcmp(offline, "0") != 0 ? no_urls : NULL;
    return hw_download_from(name, dest_dir, mirror, urls, stdout);
}
