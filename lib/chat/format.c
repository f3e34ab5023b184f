/* format.c - the tool-call formats: how each writes a call and reasoning,
 * which one a template uses, names, and each format's parser markers. */
#include "chat-format.h"
#include "parse-internal.h"

#include "error.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define THINK "<think>", "</think>"
#define JSON_CALL "{\"name\": \"", "\", \"arguments\": ", "}"

/* clang-format off */
static const lp_chat_format_info_t formats[LP_CHAT_FORMAT_COUNT] = {
    [LP_CHAT_FORMAT_NONE] = {LP_CHAT_FORMAT_NONE, "none", "content only (Phi 3.5, Gemma 3, any template without tool calls)",
        THINK, .reasoning_next = ""},
    [LP_CHAT_FORMAT_HERMES] = {LP_CHAT_FORMAT_HERMES, "hermes", "Hermes 2 Pro/3, Qwen 2.5, Qwen3, SmolLM3: <tool_call> JSON",
        THINK, "", "<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "\n", "", false,
        LP_CHAT_ARGS_JSON, .trigger = "<tool_call>", .reasoning_next = "\n\n"},
    [LP_CHAT_FORMAT_QWEN3_CODER] = {LP_CHAT_FORMAT_QWEN3_CODER, "qwen3-coder", "Qwen3-Coder, Qwen3.5: <tool_call><function=...><parameter=...>",
        THINK, "", "<tool_call>\n<function=", ">\n", "</function>\n</tool_call>", "\n", "", false,
        LP_CHAT_ARGS_XML, "<parameter=", ">\n", "\n</parameter>\n", "<tool_call>", "\n\n"},
    [LP_CHAT_FORMAT_GLM45] = {LP_CHAT_FORMAT_GLM45, "glm-4.5", "GLM 4.5/4.6: <tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value>",
        THINK, "", "<tool_call>", "\n", "</tool_call>", "\n", "", false,
        LP_CHAT_ARGS_XML, "<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n", "<tool_call>", "\n"},
    [LP_CHAT_FORMAT_LLAMA3] = {LP_CHAT_FORMAT_LLAMA3, "llama3", "Llama 3.1/3.2/3.3: {\"name\", \"parameters\"} JSON, <|python_tag|>",
        NULL, NULL, "", "{\"name\": \"", "\", \"parameters\": ", "}", NULL, "", false,
        LP_CHAT_ARGS_JSON, .trigger = "{\"name\": \""},
    [LP_CHAT_FORMAT_MISTRAL] = {LP_CHAT_FORMAT_MISTRAL, "mistral", "Mistral Nemo and later: [TOOL_CALLS]",
        NULL, NULL, "[TOOL_CALLS][", "{\"name\": \"", "\", \"arguments\": ", ", \"id\": \"%c\"}", ", ", "]", false,
        LP_CHAT_ARGS_JSON, .trigger = "[TOOL_CALLS]"},
    [LP_CHAT_FORMAT_GPT_OSS] = {LP_CHAT_FORMAT_GPT_OSS, "gpt-oss", "gpt-oss: harmony channels (analysis, commentary to=functions.NAME, final)",
        "<|channel|>analysis<|message|>", "<|end|>", "", " to=functions.", "<|channel|>commentary json<|message|>",
        "<|call|>", NULL, "", false, LP_CHAT_ARGS_JSON, .trigger = " to=functions.", .reasoning_next = "<|start|>assistant"},
    [LP_CHAT_FORMAT_DEEPSEEK_R1] = {LP_CHAT_FORMAT_DEEPSEEK_R1, "deepseek-r1", "DeepSeek R1 (and V3.1): <｜tool▁calls▁begin｜>",
        THINK, "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n",
        "\n```<｜tool▁call▁end｜>", "\n", "<｜tool▁calls▁end｜>", true, LP_CHAT_ARGS_JSON, .trigger = "<｜tool▁calls▁begin｜>",
        .reasoning_next = "\n\n"},
    [LP_CHAT_FORMAT_KIMI_K2] = {LP_CHAT_FORMAT_KIMI_K2, "kimi-k2", "Kimi K2: <|tool_calls_section_begin|>",
        THINK, "<|tool_calls_section_begin|>", "<|tool_call_begin|>functions.", ":%i<|tool_call_argument_begin|>",
        "<|tool_call_end|>", "", "<|tool_calls_section_end|>", false, LP_CHAT_ARGS_JSON,
        .trigger = "<|tool_calls_section_begin|>", .reasoning_next = ""},
    [LP_CHAT_FORMAT_FUNCTIONARY_V32] = {LP_CHAT_FORMAT_FUNCTIONARY_V32, "functionary-v3.2", "Functionary v3.2: >>>NAME\\n{...} after the prompt's >>>",
        NULL, NULL, "", "", "\n", "", ">>>", "", false, LP_CHAT_ARGS_JSON, .trigger = ">>>"},
    [LP_CHAT_FORMAT_COMMAND_R7B] = {LP_CHAT_FORMAT_COMMAND_R7B, "command-r7b", "Command R7B: <|START_THINKING|>, <|START_ACTION|>",
        "<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>[\n    ",
        "{\"tool_call_id\": \"%i\", \"tool_name\": \"", "\", \"parameters\": ", "}", ",\n    ", "\n]<|END_ACTION|>", false,
        LP_CHAT_ARGS_JSON, .trigger = "<|START_ACTION|>", .reasoning_next = ""},
    [LP_CHAT_FORMAT_FIREFUNCTION_V2] = {LP_CHAT_FORMAT_FIREFUNCTION_V2, "firefunction-v2", "FireFunction v2: functools[...]",
        NULL, NULL, " functools[", JSON_CALL, ", ", "]", false, LP_CHAT_ARGS_JSON, .trigger = " functools["},
    [LP_CHAT_FORMAT_GRANITE] = {LP_CHAT_FORMAT_GRANITE, "granite", "Granite 3.x: <|tool_call|>[...], <think>, <response>",
        THINK, "<|tool_call|>[", JSON_CALL, ", ", "]", false, LP_CHAT_ARGS_JSON, .trigger = "<|tool_call|>",
        .reasoning_next = ""},
    [LP_CHAT_FORMAT_GEMMA4] = {LP_CHAT_FORMAT_GEMMA4, "gemma4", "Gemma 4: <|tool_call>call:NAME{...}<tool_call|>",
        "<|channel>thought", "<channel|>", "", "<|tool_call>call:", "", "<tool_call|>", "", "", false,
        LP_CHAT_ARGS_GEMMA, .trigger = "<|tool_call>", .reasoning_next = ""},
};
/* clang-format on */

const lp_chat_format_info_t *lp_chat_format_info(lp_chat_format_t f)
{
    if ((int)f < 0 || f >= LP_CHAT_FORMAT_COUNT) return NULL;
    return &formats[f];
}

/* ---- detection ------------------------------------------------------------- */

static bool has(const char *s, size_t n, const char *m)
{
    size_t mn = strlen(m);
    for (size_t i = 0; i + mn <= n; i++)
        if (s[i] == m[0] && !memcmp(s + i, m, mn)) return true;
    return false;
}

/* In order: a later rule's markers may appear in an earlier one's templates
 * (Qwen3.5 writes <tool_call> around its <function=...>). */
static const struct {
    const char *all[2];
    const char *any[2];
    lp_chat_format_t f;
} rules[] = {
    {{"<|channel|>", NULL}, {"<|call|>", "to=functions"}, LP_CHAT_FORMAT_GPT_OSS},
    {{"tool▁calls▁begin", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_DEEPSEEK_R1},
    {{"<|tool_calls_section_begin|>", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_KIMI_K2},
    {{"<arg_key>", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_GLM45},
    {{"<function=", "<parameter="}, {NULL, NULL}, LP_CHAT_FORMAT_QWEN3_CODER},
    {{"<|START_ACTION|>", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_COMMAND_R7B},
    {{">>>all", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_FUNCTIONARY_V32},
    {{"functools[", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_FIREFUNCTION_V2},
    {{"[TOOL_CALLS]", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_MISTRAL},
    {{"<|tool_call>", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_GEMMA4},
    {{"<|tool_call|>", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_GRANITE},
    {{"<tool_call>", NULL}, {NULL, NULL}, LP_CHAT_FORMAT_HERMES},
    {{"<|start_header_id|>", NULL}, {"ipython", "<|python_tag|>"}, LP_CHAT_FORMAT_LLAMA3},
};

lp_chat_format_t lp_chat_format_detect(const char *src, size_t len)
{
    for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
        bool ok = true;
        for (int k = 0; k < 2 && ok; k++)
            if (rules[r].all[k] && !has(src, len, rules[r].all[k])) ok = false;
        if (ok && rules[r].any[0]) {
            ok = false;
            for (int k = 0; k < 2 && !ok; k++)
                if (rules[r].any[k] && has(src, len, rules[r].any[k])) ok = true;
        }
        if (ok) return rules[r].f;
    }
    return LP_CHAT_FORMAT_NONE;
}

/* ---- names -------------------------------------------------------------------- */

static const struct {
    const char *name;
    lp_chat_format_t f;
} aliases[] = {
    {"content-only", LP_CHAT_FORMAT_NONE},     {"generic", LP_CHAT_FORMAT_NONE},
    {"hermes-2-pro", LP_CHAT_FORMAT_HERMES},   {"qwen", LP_CHAT_FORMAT_HERMES},
    {"qwen2.5", LP_CHAT_FORMAT_HERMES},        {"qwen3", LP_CHAT_FORMAT_HERMES},
    {"smollm3", LP_CHAT_FORMAT_HERMES},        {"qwen3.5", LP_CHAT_FORMAT_QWEN3_CODER},
    {"glm", LP_CHAT_FORMAT_GLM45},             {"glm-4.6", LP_CHAT_FORMAT_GLM45},
    {"llama-3", LP_CHAT_FORMAT_LLAMA3},        {"llama3.1", LP_CHAT_FORMAT_LLAMA3},
    {"llama3.2", LP_CHAT_FORMAT_LLAMA3},       {"mistral-nemo", LP_CHAT_FORMAT_MISTRAL},
    {"harmony", LP_CHAT_FORMAT_GPT_OSS},       {"deepseek", LP_CHAT_FORMAT_DEEPSEEK_R1},
    {"deepseek-v3.1", LP_CHAT_FORMAT_DEEPSEEK_R1}, {"kimi", LP_CHAT_FORMAT_KIMI_K2},
    {"functionary", LP_CHAT_FORMAT_FUNCTIONARY_V32}, {"command-r", LP_CHAT_FORMAT_COMMAND_R7B},
    {"firefunction", LP_CHAT_FORMAT_FIREFUNCTION_V2}, {"gemma-4", LP_CHAT_FORMAT_GEMMA4},
};

int lp_chat_format_by_name(const char *name, lp_chat_format_t *out)
{
    for (int f = 0; f < LP_CHAT_FORMAT_COUNT; f++)
        if (!strcasecmp(name, formats[f].name)) {
            *out = (lp_chat_format_t)f;
            return 0;
        }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (!strcasecmp(name, aliases[i].name)) {
            *out = aliases[i].f;
            return 0;
        }
    char list[512];
    size_t n = 0;
    list[0] = 0;
    for (int f = 0; f < LP_CHAT_FORMAT_COUNT && n < sizeof(list); f++)
        n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", f ? ", " : "", formats[f].name);
    return lp_error_set(LP_ERR(EINVAL), "unknown tool-call format \"%s\" (known: %s)", name, list);
}

int lp_chat_reasoning_format_by_name(const char *name, lp_chat_reasoning_format_t *out)
{
    if (!strcmp(name, "auto")) *out = LP_CHAT_REASONING_AUTO;
    else if (!strcmp(name, "none")) *out = LP_CHAT_REASONING_NONE;
    else if (!strcmp(name, "deepseek")) *out = LP_CHAT_REASONING_DEEPSEEK;
    else
        return lp_error_set(LP_ERR(EINVAL),
                            "reasoning_format: \"%s\" is not one of \"auto\", \"none\", \"deepseek\"", name);
    return 0;
}

bool lp_chat_prompt_opens_reasoning(lp_chat_format_t format, const char *prompt, size_t len)
{
    const lp_chat_format_info_t *fi = lp_chat_format_info(format);
    if (!fi || !fi->reasoning_open || !prompt || format == LP_CHAT_FORMAT_GPT_OSS) return false;
    while (len && lp__is_ws(prompt[len - 1])) len--;
    size_t on = strlen(fi->reasoning_open);
    return len >= on && !memcmp(prompt + len - on, fi->reasoning_open, on);
}

/* ---- the parser's markers per format ------------------------------------------- */

extern const lp__fmt_ops_t lp__ops_hermes, lp__ops_llama3, lp__ops_mistral, lp__ops_firefunction, lp__ops_granite,
    lp__ops_command_r7b, lp__ops_functionary, lp__ops_deepseek, lp__ops_kimi, lp__ops_harmony, lp__ops_gemma4;

static const lp__fmt_ops_t ops_none = {NULL, 0, NULL, false};

const lp__fmt_ops_t *lp__fmt_ops(lp_chat_format_t f)
{
    switch (f) {
    case LP_CHAT_FORMAT_HERMES:
    case LP_CHAT_FORMAT_QWEN3_CODER:
    case LP_CHAT_FORMAT_GLM45: return &lp__ops_hermes;
    case LP_CHAT_FORMAT_LLAMA3: return &lp__ops_llama3;
    case LP_CHAT_FORMAT_MISTRAL: return &lp__ops_mistral;
    case LP_CHAT_FORMAT_GPT_OSS: return &lp__ops_harmony;
    case LP_CHAT_FORMAT_DEEPSEEK_R1: return &lp__ops_deepseek;
    case LP_CHAT_FORMAT_KIMI_K2: return &lp__ops_kimi;
    case LP_CHAT_FORMAT_FUNCTIONARY_V32: return &lp__ops_functionary;
    case LP_CHAT_FORMAT_COMMAND_R7B: return &lp__ops_command_r7b;
    case LP_CHAT_FORMAT_FIREFUNCTION_V2: return &lp__ops_firefunction;
    case LP_CHAT_FORMAT_GRANITE: return &lp__ops_granite;
    case LP_CHAT_FORMAT_GEMMA4: return &lp__ops_gemma4;
    default: return &ops_none;
    }
}
