/* hello.h - the hello that opens every connection (proto/lmpipe.proto).
 *
 * The connecting side sends Hello; the bound side checks the protocol name,
 * version and role and answers with its own Hello or an Error.  The vocabulary
 * facts (row length, tokenizer size, vocab hash) must agree between every
 * pair of services: a mismatch is refused with a message that names both
 * values (lib/vocab/vocab-facts.h computes them). */
#ifndef LP_HELLO_H
#define LP_HELLO_H

#include <stdint.h>

#include "lmpipe.pb-c.h"

#define LP_PROTOCOL_NAME "lmpipe"
#define LP_PROTOCOL_VERSION 1u

/* "hostname/boot-id", or $LMPIPE_HOST_ID when set; borrowed, static. */
const char *lp_host_id(void);
const char *lp_role_name(Lmpipe__Role r);

/* Fill protocol, version, role, host_id and pid; every other field zero.
 * The strings are static. */
void lp_hello_init(Lmpipe__Hello *h, Lmpipe__Role role);

/* Check protocol name and version, that the role is one of the enum's
 * (not ROLE_UNKNOWN), and that it is `expect` (or any role when expect is
 * ROLE_UNKNOWN).  LP_ERR(EPROTO) with a message. */
int lp_hello_check(const Lmpipe__Hello *h, Lmpipe__Role expect);

/* Check that two hellos describe the same vocabulary, where both say.
 * LP_ERR(EPROTO) with a message naming both values. */
int lp_hello_check_vocab(const Lmpipe__Hello *a, const Lmpipe__Hello *b);

#endif
