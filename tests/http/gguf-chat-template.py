#!/usr/bin/env python3
"""Copy a GGUF file and set tokenizer.chat_template in the copy.

The test models carry no chat template, and chat goes through the model's own
template (tokenizer-svc), so the chat tests give stories260K Llama 2's.
usage: gguf-chat-template.py IN.gguf OUT.gguf [TEMPLATE]
"""
import struct
import sys

LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
          "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + ' ' + eos_token }}"
          "{% endif %}{% endfor %}")
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


def main():
    src, dst = sys.argv[1], sys.argv[2]
    tmpl = sys.argv[3] if len(sys.argv) > 3 else LLAMA2
    data = open(src, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    if magic != b"GGUF" or version < 2:
        sys.exit(f"{src}: not a GGUF v2/v3 file")
    pos = 24

    def string(p):
        (n,) = struct.unpack_from("<Q", data, p)
        return data[p + 8:p + 8 + n].decode(), p + 8 + n

    def value(t, p):
        if t in FIXED:
            return data[p:p + FIXED[t]], p + FIXED[t]
        if t == STRING:
            _, end = string(p)
            return data[p:end], end
        if t == ARRAY:
            et, n = struct.unpack_from("<IQ", data, p)
            q = p + 12
            for _ in range(n):
                _, q = value(et, q)
            return data[p:q], q
        sys.exit(f"{src}: unknown value type {t}")

    kvs, alignment = [], 32
    for _ in range(n_kv):
        start = pos
        name, pos = string(pos)
        (t,) = struct.unpack_from("<I", data, pos)
        raw, pos = value(t, pos + 4)
        if name == "general.alignment":
            (alignment,) = struct.unpack_from("<I", raw)
        if name != "tokenizer.chat_template":
            kvs.append(data[start:pos])
    infos_start = pos
    for _ in range(n_tensors):
        _, pos = string(pos)
        (nd,) = struct.unpack_from("<I", data, pos)
        pos += 4 + 8 * nd + 4 + 8
    infos = data[infos_start:pos]
    tensor_data = data[(pos + alignment - 1) // alignment * alignment:]

    key, val = b"tokenizer.chat_template", tmpl.encode()
    kvs.append(struct.pack("<Q", len(key)) + key + struct.pack("<IQ", STRING, len(val)) + val)
    head = struct.pack("<4sIQQ", b"GGUF", version, n_tensors, len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * (-len(head) % alignment)
    with open(dst, "wb") as f:
        f.write(head)
        f.write(tensor_data)


if __name__ == "__main__":
    main()
