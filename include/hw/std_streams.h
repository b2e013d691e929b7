// std_streams: the standard descriptors 0, 1 and 2, kept apart from the run's own files, and the
// output on stdout checked before the process exits (src/proc/std_streams.c).
#ifndef HW_STD_STREAMS_H
#define HW_STD_STREAMS_H

// Opens /dev/null on each of descriptors 0, 1 and 2 that is closed, before anything else is
// opened: otherwise the first file the run opens (its shared memory, a checkpoint) takes that
// number and the run's own lines are written into it. stdout and stderr get /dev/null read-only,
// so that a write still fails (EBADF) as it did on the closed descriptor: the run sees a closed
// stdout as it sees a closed pipe. Call first thing in main.
void hw_std_streams_open(void);

// Flushes stdout; 0, or EOF with errno set and the first error kept for hw_std_streams_finish.
int hw_stdout_flush(void);

// Whether `err`, a failed write to stdout, means nobody reads it any more (a closed pipe: EPIPE,
// a closed descriptor: EBADF), which loses nothing anyone asked for.
int hw_stdout_reader_gone(int err);

// The process's exit status once stdout is flushed: `status`, or HW_EXIT_FAILURE (1) when an
// output on stdout was lost (disk full, /dev/full, an I/O error), said on stderr as `program`:
// ... with the reason. A closed pipe or descriptor keeps `status` (hw_stdout_reader_gone).
int hw_std_streams_finish(const char *program, int status);

#endif
