/* chat-format.h - how a model writes tool calls and reasoning in its output,
 * one row per format, and which format a chat template uses.
 *
 * A format is detected from the template's source (the markers it writes
 * when it renders earlier tool calls, which are the markers the model was
 * trained to produce) or named explicitly.  Each row also says how one call
 * is written, so that a grammar can force a call (chat-grammar.h), and
 * which markers delimit reasoning.  docs/TEMPLATES.md lists the formats. */
#ifndef LP_CHAT_FORMAT_H
#define LP_CHAT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum lp_chat_format {
    LP_CHAT_FORMAT_NONE = 0,         /* no tool calls: content, and <think> reasoning */
    LP_CHAT_FORMAT_HERMES,           /* <tool_call>{"name", "arguments"}</tool_call>: Hermes 2/3, Qwen 2.5/3, SmolLM3 */
    LP_CHAT_FORMAT_QWEN3_CODER,      /* <tool_call><function=NAME><parameter=K>V</parameter>...: Qwen3-Coder, Qwen3.5 */
    LP_CHAT_FORMAT_GLM45,            /* <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>: GLM 4.5/4.6 */
    LP_CHAT_FORMAT_LLAMA3,           /* {"name", "parameters"} as the whole answer, <|python_tag|>: Llama 3.1/3.2/3.3 */
    LP_CHAT_FORMAT_MISTRAL,          /* [TOOL_CALLS][{"name", "arguments", "id"}...], [TOOL_CALLS]NAME[ARGS]{...} */
    LP_CHAT_FORMAT_GPT_OSS,          /* harmony channels: analysis, commentary to=functions.NAME, final */
    LP_CHAT_FORMAT_DEEPSEEK_R1,      /* <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json ...``` */
    LP_CHAT_FORMAT_KIMI_K2,          /* <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:I<|tool_call_argument_begin|>{...} */
    LP_CHAT_FORMAT_FUNCTIONARY_V32,  /* >>>NAME\n{...}, >>>all\ntext */
    LP_CHAT_FORMAT_COMMAND_R7B,      /* <|START_THINKING|>, <|START_ACTION|>[{"tool_name", "parameters"}]<|END_ACTION|> */
    LP_CHAT_FORMAT_FIREFUNCTION_V2,  /*  functools[{"name", "arguments"}] */
    LP_CHAT_FORMAT_GRANITE,          /* <|tool_call|>[{"name", "arguments"}], <think>, <response> */
    LP_CHAT_FORMAT_GEMMA4,           /* <|tool_call>call:NAME{key:<|"|>v<|"|>}<tool_call|>, <|channel>thought */
    LP_CHAT_FORMAT_COUNT
} lp_chat_format_t;

/* How a call's arguments are written. */
typedef enum lp_chat_args_layout {
    LP_CHAT_ARGS_JSON,   /* one JSON object */
    LP_CHAT_ARGS_XML,    /* param_open KEY param_name_close VALUE param_close, per parameter */
    LP_CHAT_ARGS_GEMMA,  /* Gemma 4's {key:value} notation, strings in <|"|> */
} lp_chat_args_layout_t;

typedef struct lp_chat_format_info {
    lp_chat_format_t format;
    const char *name;             /* "hermes": what lp_chat_format_by_name takes */
    const char *title;            /* the models, for people */
    /* reasoning: NULL when the format has none.  The block may open only at
     * the start of the output (or in the prompt, see chat-parse.h). */
    const char *reasoning_open;   /* "<think>" */
    const char *reasoning_close;  /* "</think>" */
    /* How one call is written, to build a grammar.  Literals, except that
     * "%i" stands for the call's index (0, 1, ...) and "%c" for a call id of
     * 9 letters and digits (Mistral's).  A message's
     * calls are: prefix, call 0, separator, call 1, ..., suffix; a call is
     * call_open NAME name_close ARGUMENTS call_close.  separator is NULL
     * where the format takes one call per message. */
    const char *prefix;           /* NULL: the format has no calls */
    const char *call_open;
    const char *name_close;
    const char *call_close;
    const char *separator;
    const char *suffix;
    bool suffix_optional;         /* the template leaves the suffix out (DeepSeek R1 after one call) */
    lp_chat_args_layout_t args;
    /* LP_CHAT_ARGS_XML: each parameter is param_open KEY param_name_close
     * VALUE param_close; a string parameter's VALUE is its raw text, any
     * other is JSON. */
    const char *param_open, *param_name_close, *param_close;
    /* where a call starts in free text, for a grammar that applies only
     * once a call has begun (tool_choice auto); NULL where none does */
    const char *trigger;
    /* what the model writes between reasoning and a call (gpt-oss starts a
     * new message); NULL where reasoning is not followed by a call */
    const char *reasoning_next;
} lp_chat_format_info_t;

/* The row of a format; NULL for a value out of range. */
const lp_chat_format_info_t *lp_chat_format_info(lp_chat_format_t f);

/* The format a template writes (its markers), LP_CHAT_FORMAT_NONE when it
 * writes none that is known.  src need not be NUL-terminated. */
lp_chat_format_t lp_chat_format_detect(const char *src, size_t len);

/* A format by its name ("hermes", "qwen3-coder", ...; case-insensitive,
 * with the aliases docs/TEMPLATES.md lists): 0 and *out, or LP_ERR(EINVAL)
 * with a message that lists the names. */
int lp_chat_format_by_name(const char *name, lp_chat_format_t *out);

/* ---- reasoning ---------------------------------------------------------- */

/* What becomes of reasoning, as llama-server's --reasoning-format. */
typedef enum lp_chat_reasoning_format {
    LP_CHAT_REASONING_AUTO = 0,  /* as DEEPSEEK (llama-server's default) */
    LP_CHAT_REASONING_NONE,      /* left in content, markers and all */
    LP_CHAT_REASONING_DEEPSEEK,  /* moved to reasoning_content */
} lp_chat_reasoning_format_t;

/* Does the rendered prompt end with the format's reasoning opening (white
 * space aside), as Qwen3's, Qwen3.5's and DeepSeek R1's generation prompts
 * do?  Then the output starts inside reasoning. */
bool lp_chat_prompt_opens_reasoning(lp_chat_format_t format, const char *prompt, size_t len);

/* "auto", "none", "deepseek": 0 and *out, or LP_ERR(EINVAL) naming the value. */
int lp_chat_reasoning_format_by_name(const char *name, lp_chat_reasoning_format_t *out);

#endif
