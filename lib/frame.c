/* frame.c - lmpipe messages on ZeroMQ sockets (see frame.h). */
#include "frame.h"

#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void drop_rest(void *sock)
{
    int more = 1;
    size_t len = sizeof(more);
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        zmq_msg_close(&m);
        len = sizeof(more);
    }
}

static bool has_more(void *sock)
{
    int more = 0;
    size_t len = sizeof(more);
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more;
}

int lp_frame_recv(void *sock, bool router, lp_frame_t *f)
{
    f->peer_len = 0;
    f->user_id[0] = '\0';
    f->msg = NULL;
    f->has_raw = false;
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, sock, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&part);
        return e == EAGAIN ? LP_ERR(EAGAIN) : lp_error_set(LP_ERR(e), "zmq recv: %s", zmq_strerror(e));
    }
    if (router) {
        size_t n = zmq_msg_size(&part);
        if (n > LP_FRAME_MAX_PEER) n = LP_FRAME_MAX_PEER;
        memcpy(f->peer, zmq_msg_data(&part), n);
        f->peer_len = n;
        if (!zmq_msg_more(&part)) {
            zmq_msg_close(&part);
            return lp_error_set(LP_ERR(EPROTO), "malformed message: routing id without a body");
        }
        zmq_msg_close(&part);
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return lp_error_set(LP_ERR(EPROTO), "malformed message: body missing");
        }
    }
    const char *uid = zmq_msg_gets(&part, "User-Id");
    if (uid) snprintf(f->user_id, sizeof(f->user_id), "%s", uid);
    size_t n = zmq_msg_size(&part);
    if (n > LP_FRAME_MAX_BYTES) {
        zmq_msg_close(&part);
        drop_rest(sock);
        return lp_error_set(LP_ERR(EPROTO), "malformed message: body of %zu bytes", n);
    }
    f->msg = lmpipe__msg__unpack(NULL, n, zmq_msg_data(&part));
    zmq_msg_close(&part);
    if (!f->msg) {
        drop_rest(sock);
        return lp_error_set(LP_ERR(EPROTO), "malformed message: %zu-byte body is not a Msg", n);
    }
    if (has_more(sock)) {
        zmq_msg_init(&f->raw);
        if (zmq_msg_recv(&f->raw, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f->raw);
            lp_frame_clear(f);
            return lp_error_set(LP_ERR(EPROTO), "malformed message: raw frame missing");
        }
        f->has_raw = true;
        if (has_more(sock)) {
            drop_rest(sock);
            lp_frame_clear(f);
            return lp_error_set(LP_ERR(EPROTO), "malformed message: more than one raw frame");
        }
    }
    return 0;
}

void lp_frame_clear(lp_frame_t *f)
{
    if (f->msg) lmpipe__msg__free_unpacked(f->msg, NULL);
    f->msg = NULL;
    if (f->has_raw) zmq_msg_close(&f->raw);
    f->has_raw = false;
}

const void *lp_frame_raw(const lp_frame_t *f, size_t *len)
{
    if (!f->has_raw) {
        *len = 0;
        return NULL;
    }
    *len = zmq_msg_size((zmq_msg_t *)&f->raw);
    return zmq_msg_data((zmq_msg_t *)&f->raw);
}

int lp_frame_send(void *sock, const uint8_t *peer, size_t peer_len, const Lmpipe__Msg *msg,
                  const void *raw, size_t raw_len)
{
    size_t n = lmpipe__msg__get_packed_size(msg);
    uint8_t stackbuf[1024];
    uint8_t *buf = n <= sizeof(stackbuf) ? stackbuf : malloc(n);
    if (!buf) return LP_ERR(ENOMEM);
    lmpipe__msg__pack(msg, buf);
    int rc = 0;
    if (peer && zmq_send(sock, peer, peer_len, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0) goto fail;
    if (zmq_send(sock, buf, n, ZMQ_DONTWAIT | (raw_len ? ZMQ_SNDMORE : 0)) < 0) goto fail;
    if (raw_len && zmq_send(sock, raw, raw_len, ZMQ_DONTWAIT) < 0) goto fail;
    goto done;
fail:
    rc = LP_ERR(zmq_errno());
    lp_error_set(rc, "zmq send: %s", zmq_strerror(-rc));
done:
    if (buf != stackbuf) free(buf);
    return rc;
}

static int send_error(void *sock, const uint8_t *peer, size_t peer_len, uint64_t id, int code,
                      enum lp_error_kind kind, const char *param, const char *fmt, va_list ap)
{
    char text[1024];
    vsnprintf(text, sizeof(text), fmt, ap);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Error e = LMPIPE__ERROR__INIT;
    e.code = code;
    e.message = text;
    e.kind = (Lmpipe__ErrorKind)kind;
    e.param = (char *)(param ? param : "");
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_ERROR;
    m.error = &e;
    return lp_frame_send(sock, peer, peer_len, &m, NULL, 0);
}

int lp_frame_send_error(void *sock, const uint8_t *peer, size_t peer_len, uint64_t id, int code,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = send_error(sock, peer, peer_len, id, code, lp_error_kind_of(code), NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int lp_frame_send_error_kind(void *sock, const uint8_t *peer, size_t peer_len, uint64_t id, int code,
                             enum lp_error_kind kind, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = send_error(sock, peer, peer_len, id, code, kind, param, fmt, ap);
    va_end(ap);
    return rc;
}

enum lp_error_kind lp_frame_error_kind(const Lmpipe__Error *e)
{
    if ((int)e->kind > 0 && (int)e->kind < LP_EK_COUNT)
        return (enum lp_error_kind)e->kind;
    return lp_error_kind_of(e->code); /* an older peer */
}

enum lp_error_kind lp_frame_final_kind(const Lmpipe__FinalEvent *f)
{
    if (f->retryable) return LP_EK_UNAVAILABLE;
    if ((int)f->error_kind > 0 && (int)f->error_kind < LP_EK_COUNT) return (enum lp_error_kind)f->error_kind;
    return LP_EK_INTERNAL;
}

const char *lp_msg_body_name(Lmpipe__Msg__BodyCase c)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field(&lmpipe__msg__descriptor, (unsigned)c);
    return c != LMPIPE__MSG__BODY__NOT_SET && fd ? fd->name : "(none)";
}
