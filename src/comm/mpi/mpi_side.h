// mpi_side: the MPI side of src/comm/, libhogwild-mpi.so (private to src/comm/).
//
// init.c, settings.c, dataparallel_sum.c and hogwild_coupling.c call MPI; in an MPI build they
// are libhogwild-mpi.so, beside the hogwild binary, which src/comm/mpi_plugin.c enters only when
// the process is a rank of a job of several: a plain run maps no MPI library. They implement
// include/hw/comm.h's calls under the names below, gathered in one table, hw_mpi_plugin (entry.c),
// the plugin's one exported symbol.
#ifndef HW_COMM_MPI_H
#define HW_COMM_MPI_H

#include "hw/comm.h"

typedef struct {
    int (*init)(const hw_world *world, double timeout_s);
    int (*settings_agree)(const hw_comm_setting *settings, int n);
    void (*finalize)(void);
    void (*abort)(int code);
    int (*sum)(float *buf, size_t n, double timeout_s);
    int (*sum_polled)(float *buf, size_t n, double timeout_s, const char *what);
    int (*min_int)(int *value);
    int (*weights_agree)(const float *weights, size_t n, const char *when);
    int (*bcast)(void *buf, size_t bytes, int root);
    int (*couple_open)(hw_couple **couple, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world);
    int (*couple_poll)(hw_couple *couple, int state, int64_t samples, double loss_sum);
    int (*couple_epoch_agreed)(hw_couple *couple, const char *when, int *agreed);
    void (*couple_view_read)(const hw_couple *couple, hw_couple_view *view);
    void (*couple_weights)(const hw_couple *couple, float *weights);
    double (*couple_wait)(const hw_couple *couple);
    void (*couple_report)(const hw_couple *couple, char *text, size_t cap);
    void (*couple_close)(hw_couple *couple);
} comm_ops;

// The table of the MPI side, the one symbol mpi_plugin.c looks up in the plugin.
extern const comm_ops hw_mpi_plugin;

// Sets the message "rank R: <what> failed: <MPI's text for code>" and returns HW_ERR.
int comm_mpi_failed(int code, const char *what);

// init.c
int comm_mpi_init(const hw_world *world, double timeout_s);
// The job's bound on a wait for the other ranks (--sync-timeout), set by comm_mpi_init.
double comm_mpi_timeout(void);
// Arms the watchdog around a blocking MPI call: past `seconds` it writes `message` (which must
// outlive the call), removes this process's shared memory and temporary file, and _exit(1)s.
// seconds 0 disarms it.
int comm_mpi_watchdog(double seconds, const char *message);
#ifdef MPI_VERSION  // the MPI side's files, which include <mpi.h> first (mpi_plugin.c does not)
// Waits for `requests`, polling, at most timeout_s seconds (0: for ever): HW_ERR naming `what`
// when they did not complete in time, or, with `leave_on_stop`, when a stop signal came.
int comm_mpi_wait(MPI_Request *requests, int n, double timeout_s, int leave_on_stop, const char *what);
#endif
// settings.c
int comm_mpi_settings_agree(const hw_comm_setting *settings, int n);
void comm_mpi_finalize(void);
void comm_mpi_abort(int code);
// dataparallel_sum.c
int comm_mpi_sum(float *buf, size_t n, double timeout_s);
int comm_mpi_sum_polled(float *buf, size_t n, double timeout_s, const char *what);
int comm_mpi_min_int(int *value);
int comm_mpi_weights_agree(const float *weights, size_t n, const char *when);
int comm_mpi_bcast(void *buf, size_t bytes, int root);
// The same for Hogwild's coupling: an error after timeout_s seconds (0: none), so that a rank stuck
// or gone cannot hang the others, or as soon as a stop signal comes (the rank then saves).
int comm_mpi_weights_agree_within(const float *weights, size_t n, const char *when, double timeout_s);
// hogwild_coupling.c
int comm_mpi_couple_open(hw_couple **couple, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world);
int comm_mpi_couple_poll(hw_couple *couple, int state, int64_t samples, double loss_sum);
int comm_mpi_couple_epoch_agreed(hw_couple *couple, const char *when, int *agreed);
void comm_mpi_couple_view_read(const hw_couple *couple, hw_couple_view *view);
void comm_mpi_couple_weights(const hw_couple *couple, float *weights);
double comm_mpi_couple_wait(const hw_couple *couple);
void comm_mpi_couple_report(const hw_couple *couple, char *text, size_t cap);
void comm_mpi_couple_close(hw_couple *couple);

#endif
