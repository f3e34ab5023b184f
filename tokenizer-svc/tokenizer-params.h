/* tokenizer-params.h - tokenizer-svc's parameters: one table (lib/params.h),
 * read from the config file (--config FILE --service tokenizer) and the flags. */
#ifndef LP_TOKENIZER_PARAMS_H
#define LP_TOKENIZER_PARAMS_H

#include "curve.h"
#include "params.h"

typedef struct lp_tokenizer_opts {
    const char *model;
    const char *endpoint; /* tokenizer.endpoint: EP[,EP...], the coordinator's list; it binds the first */
    const char *chat_template_file; /* NULL: the model's tokenizer.chat_template */
    lp_curve_opts_t curve;
} lp_tokenizer_opts_t;

extern const lp_params_t lp_tokenizer_params;

#endif
