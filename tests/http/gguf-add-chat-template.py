#!/usr/bin/env python3
"""Copy a GGUF file with a tokenizer.chat_template key added.

stories260K has no chat template, and /v1/chat/completions needs one; the
browser test chats with a copy that names a template family ("chatml").
The tensor data is copied unchanged; only the metadata grows and the data
start is re-padded to the file's alignment (tensor offsets are relative to
it).  usage: gguf-add-chat-template.py IN.gguf OUT.gguf TEMPLATE
"""
import struct
import sys

FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32 = 8, 9, 4


def skip_value(d, t, o):
    if t in FIXED:
        return o + FIXED[t]
    if t == STRING:
        (n,) = struct.unpack_from('<Q', d, o)
        return o + 8 + n
    if t == ARRAY:
        it, n = struct.unpack_from('<IQ', d, o)
        o += 12
        if it in FIXED:
            return o + FIXED[it] * n
        for _ in range(n):
            o = skip_value(d, it, o)
        return o
    raise ValueError('unknown GGUF value type %d' % t)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    src, dst, tmpl = sys.argv[1:]
    d = open(src, 'rb').read()
    if d[:4] != b'GGUF':
        sys.exit('%s: not a GGUF file' % src)
    version, n_tensors, n_kv = struct.unpack_from('<IQQ', d, 4)
    if version < 2:
        sys.exit('%s: GGUF version %d (2 or 3 needed)' % (src, version))
    o, align = 24, 32
    for _ in range(n_kv):
        (n,) = struct.unpack_from('<Q', d, o)
        key = d[o + 8:o + 8 + n]
        o += 8 + n
        (t,) = struct.unpack_from('<I', d, o)
        o += 4
        if key == b'tokenizer.chat_template':
            sys.exit('%s: already has tokenizer.chat_template' % src)
        if key == b'general.alignment' and t == UINT32:
            (align,) = struct.unpack_from('<I', d, o)
        o = skip_value(d, t, o)
    kv_end = o
    for _ in range(n_tensors):
        (n,) = struct.unpack_from('<Q', d, o)
        o += 8 + n
        (n_dims,) = struct.unpack_from('<I', d, o)
        o += 4 + 8 * n_dims + 4 + 8
    infos_end = o
    data_start = -(-infos_end // align) * align

    key, val = b'tokenizer.chat_template', tmpl.encode()
    kv = struct.pack('<Q', len(key)) + key + struct.pack('<IQ', STRING, len(val)) + val
    head = (d[:4] + struct.pack('<IQQ', version, n_tensors, n_kv + 1) + d[24:kv_end] + kv +
            d[kv_end:infos_end])
    with open(dst, 'wb') as f:
        f.write(head + b'\0' * (-len(head) % align) + d[data_start:])


if __name__ == '__main__':
    main()
