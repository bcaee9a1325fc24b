/* The timed loop of backend=nccl with backend.loop=c: issues one point's NCCL calls
 * `iters` times back to back, as nccl-tests' startColl loop does, with no Python
 * between the calls. Built at run time by nccl_loop.py with the system's C compiler; the
 * function pointers are the ones nccl4py resolved in the libnccl it loaded, so the
 * communicator handle belongs to the same library.
 *
 * NCCL's prototypes (nccl.h): every data type and reduction is an enum (int), the
 * communicator and the stream are pointers, the result is ncclResult_t (int).
 */
#include <stddef.h>

enum gl_shape {
  GL_REDUCE_OP = 0, /* f(send, recv, count, dtype, op, comm, stream): ncclAllReduce, ncclReduceScatter */
  GL_ROOT_OP = 1,   /* f(send, recv, count, dtype, op, root, comm, stream): ncclReduce */
  GL_ROOT = 2,      /* f(send, recv, count, dtype, root, comm, stream): ncclBroadcast */
  GL_PLAIN = 3,     /* f(send, recv, count, dtype, comm, stream): ncclAllGather, ncclAlltoAll */
  GL_PEER = 4       /* f(buf, count, dtype, peer, comm, stream): ncclSend, ncclRecv */
};

typedef int (*gl_reduce_op_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*gl_root_op_t)(const void*, void*, size_t, int, int, int, void*, void*);
typedef int (*gl_root_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*gl_plain_t)(const void*, void*, size_t, int, void*, void*);
typedef int (*gl_peer_t)(void*, size_t, int, int, void*, void*);
typedef int (*gl_group_t)(void);

/* One NCCL call with every argument but the communicator and the stream. Keep in step
 * with GlCall in nccl_loop.py. */
struct gl_call {
  int shape;
  int dtype;
  int op;
  int root; /* root of ncclReduce/ncclBroadcast, peer of ncclSend/ncclRecv */
  void* fn;
  void* send; /* the one buffer of ncclSend/ncclRecv */
  void* recv;
  size_t count;
};

/* The size of struct gl_call as this compiler lays it out: nccl_loop.py checks it
 * against its ctypes mirror before the first call. */
size_t gl_call_size(void) { return sizeof(struct gl_call); }

static int gl_one(const struct gl_call* c, void* comm, void* stream) {
  switch (c->shape) {
    case GL_REDUCE_OP:
      return ((gl_reduce_op_t)c->fn)(c->send, c->recv, c->count, c->dtype, c->op, comm, stream);
    case GL_ROOT_OP:
      return ((gl_root_op_t)c->fn)(c->send, c->recv, c->count, c->dtype, c->op, c->root, comm,
                                   stream);
    case GL_ROOT:
      return ((gl_root_t)c->fn)(c->send, c->recv, c->count, c->dtype, c->root, comm, stream);
    case GL_PLAIN:
      return ((gl_plain_t)c->fn)(c->send, c->recv, c->count, c->dtype, comm, stream);
    case GL_PEER:
      return ((gl_peer_t)c->fn)(c->send, c->count, c->dtype, c->root, comm, stream);
    default:
      return -1;
  }
}

/* Issue the calls `iters` times; several calls make one NCCL group per iteration.
 * Returns 0, or the first NCCL error (the group is still closed), with the iteration
 * and the call that failed in *where (iteration * ncalls + call). */
int gl_issue(const struct gl_call* calls, int ncalls, void* group_start, void* group_end,
             void* comm, void* stream, long iters, long* where) {
  int grouped = ncalls > 1;
  for (long i = 0; i < iters; i++) {
    if (grouped) {
      int r = ((gl_group_t)group_start)();
      if (r != 0) {
        *where = i * ncalls;
        return r;
      }
    }
    for (int k = 0; k < ncalls; k++) {
      int r = gl_one(&calls[k], comm, stream);
      if (r != 0) {
        *where = i * ncalls + k;
        if (grouped) ((gl_group_t)group_end)();
        return r;
      }
    }
    if (grouped) {
      int r = ((gl_group_t)group_end)();
      if (r != 0) {
        *where = i * ncalls + ncalls - 1;
        return r;
      }
    }
  }
  return 0;
}

/* nccl-tests' timed loop, whole: one untimed issue (the ranks meet on the device when it
 * ends), `record(start, stream)`, `iters` issues, `record(end, stream)`, with nothing
 * between the events but the calls. `record` is the driver's cuEventRecord(CUevent,
 * CUstream) (the runtime's events and streams are the driver's). *where is -1 or -2 when
 * recording the start or the end event failed (the result is then a CUresult). */
typedef int (*gl_record_t)(void*, void*);

int gl_timed(const struct gl_call* calls, int ncalls, void* group_start, void* group_end,
             void* comm, void* stream, long iters, long* where, void* record, void* start,
             void* end) {
  int r = gl_issue(calls, ncalls, group_start, group_end, comm, stream, 1, where);
  if (r != 0) return r;
  r = ((gl_record_t)record)(start, stream);
  if (r != 0) {
    *where = -1;
    return r;
  }
  r = gl_issue(calls, ncalls, group_start, group_end, comm, stream, iters, where);
  if (r != 0) return r;
  r = ((gl_record_t)record)(end, stream);
  if (r != 0) {
    *where = -2;
    return r;
  }
  return 0;
}
