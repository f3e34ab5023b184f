/* fuzz-frames.c - arbitrary bytes as a ZeroMQ message to a ROUTER socket
 * (lib/frame.c, how every service reads every message): the first byte
 * says how many parts (1 to 4) and the next ones where they split.  The
 * reader must take it whole or refuse it (EPROTO) and leave nothing behind;
 * a Msg it accepts must pack again to bytes that unpack to the same size,
 * except one that carries unknown fields: protobuf-c 1.4.1 reads a field
 * number 0 written as an overlong tag (80 00) as an unknown field, and
 * packs it as a tag (00) that its own reader refuses. */
#include "error.h"
#include "frame.h"

#include <errno.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *ctx, *router, *dealer;

/* Whether m or a message inside it kept fields its schema does not have. */
static bool has_unknown(const ProtobufCMessage *m)
{
    if (!m) return false;
    if (m->n_unknown_fields) return true;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *arr = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                if (has_unknown(arr[k])) return true;
        } else {
            if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(const uint32_t *)(base + f->quantifier_offset) != f->id)
                continue;
            if (has_unknown(*(ProtobufCMessage *const *)(base + f->offset))) return true;
        }
    }
    return false;
}

static void setup(void)
{
    ctx = zmq_ctx_new();
    router = zmq_socket(ctx, ZMQ_ROUTER);
    dealer = zmq_socket(ctx, ZMQ_DEALER);
    if (!ctx || !router || !dealer || zmq_bind(router, "inproc://lp-fuzz-frames") ||
        zmq_connect(dealer, "inproc://lp-fuzz-frames"))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) setup();
    if (size < 1) return 0;
    int n_parts = 1 + data[0] % 4;
    data++;
    size--;
    size_t cut[4] = {0}, pos = 0;
    for (int i = 0; i < n_parts - 1 && size >= 2; i++) { /* 16-bit part lengths */
        cut[i] = (size_t)(data[0] | data[1] << 8);
        data += 2;
        size -= 2;
    }
    for (int i = 0; i < n_parts; i++) {
        size_t len = i == n_parts - 1 ? size - pos : (cut[i] < size - pos ? cut[i] : size - pos);
        if (zmq_send(dealer, data + pos, len, i < n_parts - 1 ? ZMQ_SNDMORE : 0) < 0) abort();
        pos += len;
    }
    lp_frame_t f;
    memset(&f, 0, sizeof(f));
    int rc = lp_frame_recv(router, true, &f);
    if (rc == 0) {
        if (!f.msg) abort();
        (void)lp_msg_body_name(f.msg->body_case);
        size_t raw_len = 0;
        (void)lp_frame_raw(&f, &raw_len);
        size_t n = lmpipe__msg__get_packed_size(f.msg);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf || lmpipe__msg__pack(f.msg, buf) != n) abort();
        Lmpipe__Msg *again = lmpipe__msg__unpack(NULL, n, buf);
        if ((!again || lmpipe__msg__get_packed_size(again) != n) && !has_unknown(&f.msg->base)) abort();
        if (again) lmpipe__msg__free_unpacked(again, NULL);
        free(buf);
    } else if (rc != LP_ERR(EPROTO) && rc != LP_ERR(EAGAIN)) {
        abort();
    }
    lp_frame_clear(&f);
    /* nothing of this message may be left for the next one */
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, router, ZMQ_DONTWAIT) >= 0) abort();
    zmq_msg_close(&m);
    return 0;
}
