// std_streams: descriptors 0-2 never taken by the run's files, and stdout's output checked at exit
// (include/hw/std_streams.h).
#include "hw/std_streams.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// The first error a write to stdout met (0: none).
static int stdout_error;

void hw_std_streams_open(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        // The lowest free number: fd itself, as 0..fd-1 are open by now.
        int got = open("/dev/null", O_RDONLY);
        if (got >= 0 && got != fd) {
            dup2(got, fd);
            close(got);
        }
    }
}

int hw_stdout_flush(void) {
    if (fflush(stdout) == 0) return 0;
    int err = errno;
    if (stdout_error == 0) stdout_error = err ? err : EIO;
    errno = err;
    return EOF;
}

int hw_stdout_reader_gone(int err) { return err == EPIPE || err == EBADF; }

int hw_std_streams_finish(const char *program, int status) {
    hw_stdout_flush();
    if (ferror(stdout) && stdout_error == 0) stdout_error = EIO;
    if (stdout_error == 0 || hw_stdout_reader_gone(stdout_error)) return status;
    fprintf(stderr, "%s: the output on stdout is incomplete: writing it failed: %s\n", program, strerror(stdout_error));
    return status == 0 ? 1 : status;
}
