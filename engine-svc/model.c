/* model.c - load: find the file's architecture (arch/arch.h), refuse every
 * key and tensor it would ignore, read the hyperparameters through the
 * arch, and resolve its tensor table, checking names, types and shapes. */
#include "model.h"

#include "arch/arch.h"
#include "error.h"
#include "ggml-type.h"
#include "log.h"
#include "quant.h"
#include "vocab-facts.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 128

/* Keys that never change the arithmetic: names, licences, the tokenizer,
 * llama-quantize's notes.  Everything else must be in the arch's table. */
static const char *const harmless_prefixes[] = {"general.", "tokenizer.", "quantize.", NULL};

struct lp_arch_ld {
    lp_model_t *m;
    const lp_arch_t *arch;
    size_t n_keys;
    bool *read;           /* (n_keys) the arch's keys the hyperparameter code read */
};

/* ---- keys ---------------------------------------------------------------- */

static int key_index(const lp_arch_t *a, const char *suffix)
{
    for (int i = 0; a->keys[i]; i++)
        if (!strcmp(a->keys[i], suffix)) return i;
    return -1;
}

/* "<arch>.<suffix>" into key; marks it read.  A suffix outside the table is
 * the arch file's mistake. */
static int full_key(lp_arch_ld_t *ld, const char *suffix, char *key, size_t len)
{
    int i = key_index(ld->arch, suffix);
    if (i < 0)
        return lp_error_set(LP_ERR(EINVAL), "internal: arch %s reads key '%s', which is not in "
                            "its table", ld->arch->name, suffix);
    ld->read[i] = true;
    snprintf(key, len, "%s.%s", ld->arch->name, suffix);
    return 0;
}

static int missing(int rc, bool required, const char *key)
{
    if (rc == LP_ERR(ENOENT) && required)
        return lp_error_set(LP_ERR(EINVAL), "missing required key '%s'", key);
    return rc;
}

int lp_ld_u32(lp_arch_ld_t *ld, const char *suffix, bool required, uint32_t *out)
{
    char key[KEY_MAX];
    int rc = full_key(ld, suffix, key, sizeof(key));
    return rc ? rc : missing(lp_gguf_get_u32(ld->m->gguf, key, out), required, key);
}

int lp_ld_f32(lp_arch_ld_t *ld, const char *suffix, bool required, float *out)
{
    char key[KEY_MAX];
    int rc = full_key(ld, suffix, key, sizeof(key));
    if (rc) return rc;
    rc = missing(lp_gguf_get_f32(ld->m->gguf, key, out), required, key);
    if (!rc && !isfinite(*out))
        return lp_error_set(LP_ERR(EINVAL), "key '%s': %g is not finite", key, *out);
    return rc;
}

int lp_ld_str(lp_arch_ld_t *ld, const char *suffix, bool required, lp_gguf_str_t *out)
{
    char key[KEY_MAX];
    int rc = full_key(ld, suffix, key, sizeof(key));
    return rc ? rc : missing(lp_gguf_get_str(ld->m->gguf, key, out), required, key);
}

/* n integers from a key: a scalar for all n, or an array of exactly n
 * (per_layer) or at most n (the rest 0); each in 0..INT32_MAX. */
static int read_ints(lp_arch_ld_t *ld, const char *suffix, bool required, int32_t *out,
                     int32_t n, bool per_layer)
{
    char key[KEY_MAX];
    int rc = full_key(ld, suffix, key, sizeof(key));
    if (rc) return rc;
    const lp_gguf_kv_t *kv = lp_gguf_find(ld->m->gguf, key);
    if (!kv) return missing(LP_ERR(ENOENT), required, key);
    if (kv->type != LP_GGUF_ARRAY) {
        uint32_t v;
        if ((rc = lp_gguf_get_u32(ld->m->gguf, key, &v))) return rc;
        if (v > INT32_MAX) return lp_error_set(LP_ERR(EINVAL), "key '%s': %u is too large", key, v);
        for (int32_t i = 0; i < n; i++) out[i] = (int32_t)v;
        return 0;
    }
    if (per_layer && kv->arr_n != (uint64_t)n)
        return lp_error_set(LP_ERR(EINVAL), "key '%s': an array of %llu values for %d layers",
                            key, (unsigned long long)kv->arr_n, n);
    if (kv->arr_n > (uint64_t)n)
        return lp_error_set(LP_ERR(EINVAL), "key '%s': an array of %llu values, at most %d "
                            "expected", key, (unsigned long long)kv->arr_n, n);
    if (kv->arr_type == LP_GGUF_STRING || kv->arr_type == LP_GGUF_ARRAY ||
        kv->arr_type == LP_GGUF_FLOAT32 || kv->arr_type == LP_GGUF_FLOAT64)
        return lp_error_set(LP_ERR(EINVAL), "key '%s': an array of %s, expected integers", key,
                            lp_gguf_vtype_name(kv->arr_type));
    for (int32_t i = 0; i < n; i++) {
        double v = (uint64_t)i < kv->arr_n ? lp_gguf_num_at(kv->arr_type, kv->data, (uint64_t)i) : 0;
        if (!(v >= 0 && v <= INT32_MAX))
            return lp_error_set(LP_ERR(EINVAL), "key '%s': value %g %s %d is out of range", key,
                                v, per_layer ? "of layer" : "at", i);
        out[i] = (int32_t)v;
    }
    return 0;
}

int lp_ld_layers(lp_arch_ld_t *ld, const char *suffix, bool required, int32_t *out)
{
    return read_ints(ld, suffix, required, out, ld->m->hp.n_layer, true);
}

int lp_ld_ints(lp_arch_ld_t *ld, const char *suffix, bool required, int32_t *out, int32_t n)
{
    return read_ints(ld, suffix, required, out, n, false);
}

bool lp_ld_has(const lp_arch_ld_t *ld, const char *suffix)
{
    char key[KEY_MAX];
    snprintf(key, sizeof(key), "%s.%s", ld->arch->name, suffix);
    return lp_gguf_find(ld->m->gguf, key) != NULL;
}

bool lp_ld_has_tensor(const lp_arch_ld_t *ld, const char *name)
{
    return lp_gguf_find_tensor(ld->m->gguf, name) != NULL;
}

void lp_ld_feature(lp_arch_ld_t *ld, uint32_t feats, const char *cause)
{
    lp_model_t *m = ld->m;
    for (uint32_t b = 0; b < LP_FEAT_COUNT; b++) {
        if (!(feats & (1u << b)) || (m->hp.features & (1u << b))) continue;
        if (cause[0] == '@') snprintf(m->feat_cause[b], LP_FEAT_CAUSE_MAX, "tensor '%s'", cause + 1);
        else if (cause[0] == '!') snprintf(m->feat_cause[b], LP_FEAT_CAUSE_MAX, "%s", cause + 1);
        else snprintf(m->feat_cause[b], LP_FEAT_CAUSE_MAX, "key '%s.%s'", ld->arch->name, cause);
    }
    m->hp.features |= feats;
}

int lp_ld_refuse(lp_arch_ld_t *ld, const char *suffix, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return lp_error_set(LP_ERR(ENOTSUP), "key '%s.%s': %s", ld->arch->name, suffix, why);
}

bool lp_ld_knows(const lp_arch_ld_t *ld, const char *suffix)
{
    return key_index(ld->arch, suffix) >= 0;
}

lp_model_t *lp_ld_model(lp_arch_ld_t *ld) { return ld->m; }
const char *lp_ld_arch(const lp_arch_ld_t *ld) { return ld->arch->name; }

/* Every key is harmless, or in the arch's table. */
static int check_keys(const lp_arch_ld_t *ld)
{
    const lp_gguf_t *g = ld->m->gguf;
    const size_t alen = strlen(ld->arch->name);
    for (int64_t i = 0; i < lp_gguf_n_kv(g); i++) {
        const char *key = lp_gguf_kv_at(g, i)->key;
        bool ok = false;
        for (int k = 0; harmless_prefixes[k] && !ok; k++)
            ok = !strncmp(key, harmless_prefixes[k], strlen(harmless_prefixes[k]));
        if (ok) continue;
        if (!strncmp(key, ld->arch->name, alen) && key[alen] == '.') {
            if (key_index(ld->arch, key + alen + 1) >= 0) continue;
            return lp_error_set(LP_ERR(ENOTSUP), "key '%s' is not implemented for %s (lmpipe "
                                "would ignore it and compute something other than this model)",
                                key, ld->arch->name);
        }
        return lp_error_set(LP_ERR(ENOTSUP), "key '%s' is not one lmpipe implements for a %s "
                            "model (lmpipe would ignore it and compute something other than this "
                            "model)", key, ld->arch->name);
    }
    return 0;
}

/* Every key of the table that the file has was read by the arch's code. */
static int check_read(const lp_arch_ld_t *ld)
{
    for (size_t i = 0; i < ld->n_keys; i++)
        if (!ld->read[i] && lp_ld_has(ld, ld->arch->keys[i]))
            return lp_error_set(LP_ERR(EINVAL), "internal: arch %s lists key '%s.%s' but does "
                                "not read it", ld->arch->name, ld->arch->name, ld->arch->keys[i]);
    return 0;
}

/* ---- hyperparameters ---------------------------------------------------- */

static int load_arch(lp_model_t *m, const lp_arch_t **out)
{
    lp_gguf_str_t arch;
    int rc = lp_gguf_get_str(m->gguf, "general.architecture", &arch);
    if (rc == LP_ERR(ENOENT))
        return lp_error_set(LP_ERR(EINVAL), "missing required key 'general.architecture'");
    if (rc) return rc;
    for (int i = 0; lp_archs[i]; i++) {
        if (strlen(lp_archs[i]->name) == arch.len && !memcmp(lp_archs[i]->name, arch.ptr, arch.len)) {
            *out = lp_archs[i];
            return 0;
        }
    }
    return lp_error_set(LP_ERR(ENOTSUP), "key 'general.architecture': '%.*s' is not supported "
                        "(%s are)", (int)(arch.len > 64 ? 64 : arch.len), arch.ptr,
                        lp_arch_names());
}

/* After the arch's hyperparameters: the model-wide maxima, the KV sizes, and
 * the checks every backend relies on. */
static int settle_hparams(lp_arch_ld_t *ld)
{
    lp_model_t *m = ld->m;
    lp_hparams_t *hp = &m->hp;
    const char *a = ld->arch->name;
    hp->n_head_kv = hp->head_dim = hp->n_ff = 0;
    hp->kv_floats = hp->kv_floats_swa = 0;
    hp->n_layer_swa = 0;
    int32_t first_global = -1, first_attn = -1;
    hp->n_layer_rec = 0;
    hp->rec_floats = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const lp_layer_hp_t *L = &m->layers[l].hp;
        if (hp->n_expert > 0) {
            char name[KEY_MAX];
            snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", l);
            m->layers[l].hp.moe = lp_ld_has_tensor(ld, name);
        }
        /* a mixture of experts has no dense FFN width of its own */
        if (L->moe ? L->n_ff < 0 || L->n_ff > (1 << 20) : L->n_ff <= 0 || L->n_ff > (1 << 20))
            return lp_error_set(LP_ERR(EINVAL), "%s layer %d: feed_forward_length %d is out of "
                                "range", a, l, L->n_ff);
        if (L->n_ff > hp->n_ff) hp->n_ff = L->n_ff;
        if (L->mixer == LP_MIXER_DELTANET) {
            /* no KV: the conv's last inputs and the delta rule's matrices */
            const lp_ssm_t *S = &m->ssm;
            hp->n_layer_rec++;
            hp->rec_floats += (int64_t)S->n_channels * (S->d_conv - 1) +
                              (int64_t)S->n_v_heads * S->d_state * S->d_state;
            continue;
        }
        if (first_attn < 0) first_attn = l;
        if (L->n_head_kv <= 0 || hp->n_head % L->n_head_kv)
            return lp_error_set(LP_ERR(EINVAL), "%s layer %d: %d KV heads do not divide the %d "
                                "heads", a, l, L->n_head_kv, hp->n_head);
        if (L->head_dim <= 0 || L->head_dim > 1024 || L->head_dim % 2)
            return lp_error_set(LP_ERR(EINVAL), "%s layer %d: head size %d is not an even number "
                                "up to 1024", a, l, L->head_dim);
        if (L->rope < 0 || L->rope >= m->n_ropes)
            return lp_error_set(LP_ERR(EINVAL), "internal: %s layer %d has RoPE %d of %d", a, l,
                                L->rope, m->n_ropes);
        const lp_rope_t *r = &m->ropes[L->rope];
        if (r->n_rot <= 0 || r->n_rot > L->head_dim || r->n_rot % 2)
            return lp_error_set(LP_ERR(EINVAL), "%s layer %d: %d rotated dimensions is not an even "
                                "number up to the head size %d", a, l, r->n_rot, L->head_dim);
        if (!(r->base > 0) || !isfinite(r->base) || !(r->freq_scale > 0) || !isfinite(r->freq_scale))
            return lp_error_set(LP_ERR(EINVAL), "%s layer %d: RoPE base %g and scale %g must be "
                                "positive", a, l, r->base, r->freq_scale);
        if (L->n_swa < 0 || (L->n_swa > 0) != (L->kv_group == 1))
            return lp_error_set(LP_ERR(EINVAL), "internal: %s layer %d window %d in KV group %d", a,
                                l, L->n_swa, L->kv_group);
        if (L->n_head_kv > hp->n_head_kv) hp->n_head_kv = L->n_head_kv;
        if (L->head_dim > hp->head_dim) hp->head_dim = L->head_dim;
        const int64_t kv = (int64_t)L->n_head_kv * L->head_dim;
        hp->kv_floats += kv;
        if (L->n_swa) {
            hp->kv_floats_swa += kv;
            hp->n_layer_swa++;
            if (hp->n_swa && L->n_swa != hp->n_swa)
                return lp_error_set(LP_ERR(ENOTSUP), "%s: sliding windows of %d and %d positions "
                                    "in one model are not implemented", a, hp->n_swa, L->n_swa);
            hp->n_swa = L->n_swa;
        } else if (first_global < 0) {
            first_global = l;
        }
        const lp_layer_hp_t *L0 = &m->layers[first_attn].hp;
        if (L->head_dim != L0->head_dim || L->n_head_kv != L0->n_head_kv || L->n_ff != L0->n_ff)
            lp_ld_feature(ld, LP_FEAT_LAYER_SHAPES, "attention.head_count_kv");
        if (L->rope != L0->rope) lp_ld_feature(ld, LP_FEAT_LAYER_ROPE, "rope.freq_base");
    }
    if (first_attn < 0)
        return lp_error_set(LP_ERR(ENOTSUP), "%s: no attention layer: a model of recurrent "
                            "layers only is not implemented", a);
    const lp_rope_t *r0 = &m->ropes[m->layers[first_global >= 0 ? first_global : first_attn].hp.rope];
    hp->n_rot = r0->n_rot;
    hp->rope_base = r0->base;
    hp->rope_neox = r0->neox;
    return 0;
}

/* ---- tensors ------------------------------------------------------------ */

static int64_t dim_of(const lp_model_t *m, const lp_layer_hp_t *L, uint8_t d)
{
    const lp_hparams_t *hp = &m->hp;
    switch (d) {
    case LP_D_EMBD: return hp->n_embd;
    case LP_D_VOCAB: return hp->n_vocab;
    case LP_D_Q: return (int64_t)hp->n_head * L->head_dim;
    case LP_D_KV: return (int64_t)L->n_head_kv * L->head_dim;
    case LP_D_FF: return L->n_ff;
    case LP_D_HEAD: return L->head_dim;
    case LP_D_ROT_PAIRS: return hp->n_rot / 2;
    case LP_D_ONE: return 1;
    case LP_D_HEADS: return hp->n_head;
    case LP_D_EXPERTS: return hp->n_expert;
    case LP_D_FF_EXP: return hp->n_ff_exp;
    case LP_D_FF_SHEXP: return hp->n_ff_shexp;
    case LP_D_QG: return 2 * (int64_t)hp->n_head * L->head_dim;
    case LP_D_SSM_CONV: return m->ssm.n_channels;
    case LP_D_SSM_INNER: return m->ssm.d_inner;
    case LP_D_SSM_HEADS: return m->ssm.n_v_heads;
    case LP_D_SSM_STATE: return m->ssm.d_state;
    case LP_D_SSM_KERNEL: return m->ssm.d_conv;
    default: return -1;
    }
}

/* Resolve a matrix weight with GGUF shape {n_in, n_out}, or {n_in, n_out,
 * n_mat} when n_mat > 0 (stacked experts, each matrix a slice of the
 * mapping). */
static int get_matrix(lp_model_t *m, const char *name, int64_t n_in, int64_t n_out, int64_t n_mat,
                      bool optional, lp_weight_t *w)
{
    const lp_gguf_tensor_t *t = lp_gguf_find_tensor(m->gguf, name);
    memset(w, 0, sizeof(*w));
    if (!t) {
        if (optional) return LP_ERR(ENOENT);
        return lp_error_set(LP_ERR(EINVAL), "missing tensor '%s'", name);
    }
    if (n_mat > 0 ? (t->n_dims != 3 || t->ne[2] != n_mat) : t->n_dims != 2) {
        if (n_mat > 0)
            return lp_error_set(LP_ERR(EINVAL), "tensor '%s': shape %lld x %lld x %lld, expected "
                                "%lld x %lld x %lld (one matrix per expert)", name,
                                (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                                (long long)n_in, (long long)n_out, (long long)n_mat);
        return lp_error_set(LP_ERR(EINVAL), "tensor '%s': shape %lld x %lld x %lld, expected "
                            "%lld x %lld", name, (long long)t->ne[0], (long long)t->ne[1],
                            (long long)t->ne[2], (long long)n_in, (long long)n_out);
    }
    if (t->ne[0] != n_in || (n_out >= 0 && t->ne[1] != n_out))
        return lp_error_set(LP_ERR(EINVAL), "tensor '%s': shape %lld x %lld x %lld, expected "
                            "%lld x %lld", name, (long long)t->ne[0], (long long)t->ne[1],
                            (long long)t->ne[2], (long long)n_in, (long long)n_out);
    const lp_type_traits_t *tr = lp_type_traits(t->type);
    if (!tr->computable)
        return lp_error_set(LP_ERR(ENOTSUP), "tensor '%s': type %s is not supported", name,
                            tr->name);
    w->name = t->name;
    w->type = t->type;
    w->data = t->data;
    w->n_in = t->ne[0];
    w->n_out = t->ne[1];
    w->row_bytes = lp_type_row_bytes(t->type, t->ne[0]);
    w->n_mat = n_mat > 0 ? n_mat : 1;
    w->mat_bytes = w->row_bytes * (size_t)w->n_out;
    return 0;
}

/* A 1-D tensor of n elements (n1 < 0), or a 2-D one of n x n1, converted
 * to a new float array (NULL and 0 when optional and absent). */
static int get_vector(lp_model_t *m, const char *name, int64_t n, int64_t n1, bool optional,
                      float **out)
{
    const lp_gguf_tensor_t *t = lp_gguf_find_tensor(m->gguf, name);
    *out = NULL;
    if (!t) {
        if (optional) return 0;
        return lp_error_set(LP_ERR(EINVAL), "missing tensor '%s'", name);
    }
    if (n1 >= 0) {
        if (t->n_dims != 2 || t->ne[0] != n || t->ne[1] != n1)
            return lp_error_set(LP_ERR(EINVAL), "tensor '%s': shape %lld x %lld x %lld, expected "
                                "%lld x %lld", name, (long long)t->ne[0], (long long)t->ne[1],
                                (long long)t->ne[2], (long long)n, (long long)n1);
        if (lp_type_row_bytes(t->type, n) == 0)
            return lp_error_set(LP_ERR(ENOTSUP), "tensor '%s': rows of %lld are not whole "
                                "blocks of its type", name, (long long)n);
    } else if (t->n_dims != 1 || t->ne[0] != n) {
        return lp_error_set(LP_ERR(EINVAL), "tensor '%s': shape %lld x %lld, expected %lld",
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)n);
    }
    const lp_type_traits_t *tr = lp_type_traits(t->type);
    if (!tr->computable)
        return lp_error_set(LP_ERR(ENOTSUP), "tensor '%s': type %s is not supported", name,
                            tr->name);
    const int64_t rows = n1 >= 0 ? n1 : 1;
    *out = malloc(sizeof(float) * (size_t)(n * rows));
    if (!*out) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    for (int64_t r = 0; r < rows; r++)
        lp_dequant_row(t->type, (const uint8_t *)t->data + (size_t)r * lp_type_row_bytes(t->type, n),
                       *out + r * n, n);
    n *= rows;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite((*out)[i]))
            return lp_error_set(LP_ERR(EINVAL), "tensor '%s': element %lld is not finite",
                                name, (long long)i);
    return 0;
}

/* One table entry of one layer (or a global one: L NULL, base = the model). */
static int get_entry(lp_arch_ld_t *ld, const lp_arch_tensor_t *e, const lp_layer_hp_t *L,
                     char *base, const char *name)
{
    lp_model_t *m = ld->m;
    const bool optional = e->flags & LP_T_OPTIONAL;
    const int64_t ne0 = dim_of(m, L, e->ne[0]);
    int rc;
    if (e->flags & LP_T_MATRIX) {
        rc = get_matrix(m, name, ne0, dim_of(m, L, e->ne[1]),
                        e->flags & LP_T_EXPERTS ? m->hp.n_expert : 0, optional,
                        (lp_weight_t *)(base + e->field));
        if (rc == LP_ERR(ENOENT)) return 0;
    } else {
        rc = get_vector(m, name, ne0, e->ne[1] == LP_D_NONE ? -1 : dim_of(m, L, e->ne[1]),
                        optional, (float **)(base + e->field));
    }
    if (!rc && e->feat && lp_gguf_find_tensor(m->gguf, name)) {
        char cause[KEY_MAX];
        snprintf(cause, sizeof(cause), "@%s", name);
        lp_ld_feature(ld, e->feat, cause);
    }
    return rc;
}

/* The tensor `name` of the file is one the table names. */
static bool in_table(const lp_arch_t *a, const lp_model_t *m, const char *name)
{
    const char *what = name;
    bool layer = false;
    if (!strncmp(name, "blk.", 4)) {
        char *end;
        unsigned long l = strtoul(name + 4, &end, 10);
        if (end == name + 4 || *end != '.' || l >= (unsigned long)m->hp.n_layer) return false;
        what = end + 1;
        layer = true;
    }
    for (const lp_arch_tensor_t *e = a->tensors; e->name; e++)
        if (!strcmp(e->name, what) && !!(e->flags & LP_T_LAYER) == layer) return true;
    return false;
}

static int load_weights(lp_arch_ld_t *ld)
{
    lp_model_t *m = ld->m;
    const lp_arch_t *a = ld->arch;
    const lp_gguf_t *g = m->gguf;
    for (int64_t i = 0; i < lp_gguf_n_tensors(g); i++) {
        const char *name = lp_gguf_tensor_at(g, i)->name;
        if (!in_table(a, m, name))
            return lp_error_set(LP_ERR(ENOTSUP), "tensor '%s' is not implemented for %s (lmpipe "
                                "would ignore it and compute something other than this model)",
                                name, a->name);
    }
    /* the row length, real tokens and mask, as every service computes them */
    lp_vocab_facts_t vf;
    int rc = lp_vocab_facts_load(g, &vf);
    if (rc) return rc;
    m->hp.n_vocab = vf.n_vocab;
    m->hp.n_tokens_real = vf.n_tokens_real;
    m->token_mask = vf.token_mask; /* the model takes the mask */

    for (const lp_arch_tensor_t *e = a->tensors; e->name; e++) {
        if (e->flags & LP_T_LAYER) continue;
        if ((rc = get_entry(ld, e, &m->layers[0].hp, (char *)m, e->name))) return rc;
    }
    if (!m->output.data) {
        m->output = m->tok_embd;
        m->tied_output = true;
    }
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        lp_layer_t *L = &m->layers[l];
        for (const lp_arch_tensor_t *e = a->tensors; e->name; e++) {
            if (!(e->flags & LP_T_LAYER)) continue;
            char name[KEY_MAX];
            snprintf(name, sizeof(name), "blk.%d.%s", l, e->name);
            /* a tensor of the other kind of layer would be ignored */
            const bool rec = L->hp.mixer == LP_MIXER_DELTANET;
            if ((rec && (e->flags & LP_T_ATTN)) || (!rec && (e->flags & LP_T_REC))) {
                if (lp_gguf_find_tensor(g, name))
                    return lp_error_set(LP_ERR(ENOTSUP), "tensor '%s' is not used by layer %d, "
                                        "%s layer (lmpipe would ignore it and compute "
                                        "something other than this model)", name, l,
                                        rec ? "a Gated DeltaNet" : "an attention");
                continue;
            }
            if ((rc = get_entry(ld, e, &L->hp, (char *)L, name))) return rc;
        }
    }
    return 0;
}

/* ---- the model ------------------------------------------------------------ */

static int load(lp_model_t *m)
{
    const lp_arch_t *a = NULL;
    int rc = load_arch(m, &a);
    if (rc) return rc;
    m->arch = a;
    m->hp.arch = a->name;
    lp_arch_ld_t ld = {.m = m, .arch = a};
    while (a->keys[ld.n_keys]) ld.n_keys++;
    if (!(ld.read = calloc(ld.n_keys + 1, sizeof(bool))))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    m->hp.embd_scale = 1.0f;
    int64_t id;
    m->hp.bos_id = lp_gguf_get_i64(m->gguf, "tokenizer.ggml.bos_token_id", &id) ? -1 : (int32_t)id;
    m->hp.eos_id = lp_gguf_get_i64(m->gguf, "tokenizer.ggml.eos_token_id", &id) ? -1 : (int32_t)id;
    if (!(rc = check_keys(&ld)) && !(rc = a->hparams(&ld)) && !(rc = check_read(&ld)) &&
        !(rc = settle_hparams(&ld)) && !(rc = load_weights(&ld)) && a->check)
        rc = a->check(&ld);
    free(ld.read);
    return rc;
}

int lp_model_load(const char *path, lp_model_t **out)
{
    *out = NULL;
    lp_model_t *m = calloc(1, sizeof(*m));
    if (!m) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int rc = lp_gguf_open(path, &m->gguf);
    if (!rc) rc = load(m);
    if (rc) {
        if (m->gguf) lp_error_prefix("%s: ", path);
        lp_model_destroy(&m);
        return rc;
    }
    LP_INFO("%s: %s, %d layers, n_embd %d, %d heads (%d kv), head size %d, vocab %d (%d real)%s%s",
            path, m->hp.arch, m->hp.n_layer, m->hp.n_embd, m->hp.n_head, m->hp.n_head_kv,
            m->hp.head_dim, m->hp.n_vocab, m->hp.n_tokens_real,
            m->tied_output ? ", tied output" : "", m->hp.n_swa ? ", sliding window" : "");
    *out = m;
    return 0;
}

void lp_model_destroy(lp_model_t **self_p)
{
    lp_model_t *m = self_p ? *self_p : NULL;
    if (!m) return;
    const lp_arch_t *a = m->arch;
    for (int32_t l = 0; a && m->layers && l < m->hp.n_layer; l++)
        for (const lp_arch_tensor_t *e = a->tensors; e->name; e++)
            if ((e->flags & LP_T_LAYER) && !(e->flags & LP_T_MATRIX))
                free(*(float **)((char *)&m->layers[l] + e->field));
    for (const lp_arch_tensor_t *e = a ? a->tensors : NULL; e && e->name; e++)
        if (!(e->flags & LP_T_LAYER) && !(e->flags & LP_T_MATRIX))
            free(*(float **)((char *)m + e->field));
    free(m->layers);
    free(m->token_mask);
    lp_gguf_destroy(&m->gguf);
    free(m);
    *self_p = NULL;
}

const lp_hparams_t *lp_model_hparams(const lp_model_t *m) { return &m->hp; }
const lp_gguf_t *lp_model_gguf(const lp_model_t *m) { return m->gguf; }
const uint8_t *lp_model_token_mask(const lp_model_t *m) { return m->token_mask; }
