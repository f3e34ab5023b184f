#!/usr/bin/env python3
"""Embed the web page (page.html) in the gateway as a C array."""
import sys

src, out = sys.argv[1], sys.argv[2]
data = open(src, 'rb').read()
with open(out, 'w') as f:
    f.write('/* generated from page.html by gen-page.py */\n#include <stddef.h>\n')
    f.write('const unsigned char lp_gw_page[] = {\n')
    for i in range(0, len(data), 16):
        f.write(','.join(str(b) for b in data[i:i + 16]) + ',\n')
    f.write('0};\nconst size_t lp_gw_page_len = %d;\n' % len(data))
