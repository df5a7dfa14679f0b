// llama.cpp's own command-line parser (common/arg.cpp in node-llama-cpp 3.21.1's libllama-common.so),
// asked two things for llama-args-goldens.ts:
//
//   llama-args options completion|cli|server          every flag the tool takes, as JSON
//   llama-args parse completion|cli|server ARG...     what it makes of ARG... (JSON of the fields
//                                                     memra maps), or {"error": MESSAGE}
//
// Built by build-llama-args.sh against the prebuilt libraries; nothing of llama.cpp is changed.
#include "arg.h"
#include "common.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static std::string quoted(const std::string & text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char escaped[8];
                    snprintf(escaped, sizeof(escaped), "\\u%04x", c);
                    out += escaped;
                } else {
                    out += (char) c;
                }
        }
    }
    return out + "\"";
}

static std::string list(const std::vector<const char *> & items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); i++) out += (i ? "," : "") + quoted(items[i]);
    return out + "]";
}

static std::string list(const std::vector<std::string> & items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); i++) out += (i ? "," : "") + quoted(items[i]);
    return out + "]";
}

static std::string number(double value) {
    char text[64];
    snprintf(text, sizeof(text), "%.9g", value);
    return text;
}

static bool example_of(const char * name, llama_example & ex) {
    if (strcmp(name, "completion") == 0) ex = LLAMA_EXAMPLE_COMPLETION;
    else if (strcmp(name, "cli") == 0) ex = LLAMA_EXAMPLE_CLI;
    else if (strcmp(name, "server") == 0) ex = LLAMA_EXAMPLE_SERVER;
    else if (strcmp(name, "perplexity") == 0) ex = LLAMA_EXAMPLE_PERPLEXITY;
    else if (strcmp(name, "imatrix") == 0) ex = LLAMA_EXAMPLE_IMATRIX;
    else if (strcmp(name, "embedding") == 0) ex = LLAMA_EXAMPLE_EMBEDDING;
    else return false;
    return true;
}

static void print_options(llama_example ex) {
    common_params params;
    common_params_context context = common_params_parser_init(params, ex);
    printf("[\n");
    bool first = true;
    for (const common_arg & option : context.options) {
        if (option.is_preset_only) continue;
        printf("%s  {\"args\":%s,\"negated\":%s,\"value\":%s,\"value2\":%s,\"env\":%s,\"sampling\":%s}", first ? "" : ",\n",
               list(option.args).c_str(), list(option.args_neg).c_str(), option.value_hint ? quoted(option.value_hint).c_str() : "null",
               option.value_hint_2 ? quoted(option.value_hint_2).c_str() : "null", option.env ? quoted(option.env).c_str() : "null",
               option.is_sampling ? "true" : "false");
        first = false;
    }
    printf("\n]\n");
}

static const char * cache_type_name(ggml_type type) { return ggml_type_name(type); }

static void print_parsed(const common_params & p) {
    const common_params_sampling & s = p.sampling;
    std::vector<std::string> lora;
    for (const auto & adapter : p.lora_adapters) lora.push_back(adapter.path + "@" + number(adapter.scale));
    std::vector<std::string> overrides;
    for (const auto & kv : p.kv_overrides) {
        if (kv.key[0] != 0) overrides.push_back(kv.key);
    }
    std::vector<std::string> bias;
    for (const auto & entry : s.logit_bias) bias.push_back(std::to_string(entry.token) + ":" + number(entry.bias));
    printf("{");
    printf("\"model\":%s,", quoted(p.model.path).c_str());
    printf("\"prompt\":%s,\"prompt_file\":%s,\"system_prompt\":%s,", quoted(p.prompt).c_str(), quoted(p.prompt_file).c_str(), quoted(p.system_prompt).c_str());
    printf("\"n_predict\":%d,\"n_ctx\":%d,\"n_batch\":%d,\"n_ubatch\":%d,\"n_keep\":%d,\"n_parallel\":%d,", p.n_predict, p.n_ctx, p.n_batch, p.n_ubatch, p.n_keep, p.n_parallel);
    printf("\"threads\":%d,\"threads_batch\":%d,\"n_gpu_layers\":%d,", p.cpuparams.n_threads, p.cpuparams_batch.n_threads, p.n_gpu_layers);
    printf("\"cache_type_k\":%s,\"cache_type_v\":%s,\"flash_attn\":%d,", quoted(cache_type_name(p.cache_type_k)).c_str(), quoted(cache_type_name(p.cache_type_v)).c_str(), (int) p.flash_attn_type);
    printf("\"ctx_shift\":%s,\"escape\":%s,\"special\":%s,\"antiprompt\":%s,", p.ctx_shift ? "true" : "false", p.escape ? "true" : "false", p.special ? "true" : "false", list(p.antiprompt).c_str());
    printf("\"rope_scaling_type\":%d,\"rope_freq_scale\":%s,\"yarn_orig_ctx\":%d,\"kv_overrides\":%s,", (int) p.rope_scaling_type, number(p.rope_freq_scale).c_str(), p.yarn_orig_ctx, list(overrides).c_str());
    printf("\"lora\":%s,\"lora_init_without_apply\":%s,", list(lora).c_str(), p.lora_init_without_apply ? "true" : "false");
    printf("\"draft_model\":%s,\"draft_max\":%d,\"draft_p_min\":%s,", quoted(p.speculative.draft.mparams.path).c_str(), p.speculative.draft.n_max, number(p.speculative.draft.p_min).c_str());
    printf("\"path_prompt_cache\":%s,\"prompt_cache_all\":%s,\"prompt_cache_ro\":%s,", quoted(p.path_prompt_cache).c_str(), p.prompt_cache_all ? "true" : "false", p.prompt_cache_ro ? "true" : "false");
    printf("\"hostname\":%s,\"port\":%d,\"api_keys\":%s,\"model_alias\":%s,\"slot_save_path\":%s,", quoted(p.hostname).c_str(), p.port, list(p.api_keys).c_str(),
           quoted(p.model_alias.empty() ? "" : *p.model_alias.begin()).c_str(), quoted(p.slot_save_path).c_str());
    printf("\"chat_template\":%s,\"reasoning_format\":%d,\"enable_reasoning\":%d,\"reasoning_budget\":%d,", quoted(p.chat_template).c_str(), (int) p.reasoning_format, p.enable_reasoning, s.reasoning_budget_tokens);
    printf("\"seed\":%u,\"temp\":%s,\"top_k\":%d,\"top_p\":%s,\"min_p\":%s,\"typ_p\":%s,", s.seed, number(s.temp).c_str(), s.top_k, number(s.top_p).c_str(), number(s.min_p).c_str(), number(s.typ_p).c_str());
    printf("\"penalty_last_n\":%d,\"penalty_repeat\":%s,\"penalty_freq\":%s,\"penalty_present\":%s,", s.penalty_last_n, number(s.penalty_repeat).c_str(), number(s.penalty_freq).c_str(), number(s.penalty_present).c_str());
    printf("\"dry_multiplier\":%s,\"dry_base\":%s,\"dry_allowed_length\":%d,\"dry_penalty_last_n\":%d,\"dry_sequence_breakers\":%s,", number(s.dry_multiplier).c_str(), number(s.dry_base).c_str(), s.dry_allowed_length,
           s.dry_penalty_last_n, list(s.dry_sequence_breakers).c_str());
    printf("\"xtc_probability\":%s,\"xtc_threshold\":%s,\"top_n_sigma\":%s,\"mirostat\":%d,\"mirostat_tau\":%s,\"mirostat_eta\":%s,", number(s.xtc_probability).c_str(), number(s.xtc_threshold).c_str(), number(s.top_n_sigma).c_str(), s.mirostat,
           number(s.mirostat_tau).c_str(), number(s.mirostat_eta).c_str());
    printf("\"ignore_eos\":%s,\"logit_bias\":%s,\"grammar\":%s,", s.ignore_eos ? "true" : "false", list(bias).c_str(), quoted(s.grammar.grammar).c_str());
    // the scoring tools (perplexity, imatrix, embedding)
    printf("\"n_chunks\":%d,\"ppl_stride\":%d,\"ppl_output_type\":%d,\"logits_file\":%s,\"kl_divergence\":%s,", p.n_chunks, p.ppl_stride, p.ppl_output_type, quoted(p.logits_file).c_str(), p.kl_divergence ? "true" : "false");
    printf("\"hellaswag\":%s,\"hellaswag_tasks\":%zu,\"winogrande\":%s,\"winogrande_tasks\":%zu,\"multiple_choice\":%s,\"multiple_choice_tasks\":%zu,", p.hellaswag ? "true" : "false", p.hellaswag_tasks,
           p.winogrande ? "true" : "false", p.winogrande_tasks, p.multiple_choice ? "true" : "false", p.multiple_choice_tasks);
    printf("\"out_file\":%s,\"in_files\":%s,\"n_out_freq\":%d,\"n_save_freq\":%d,\"i_chunk\":%d,\"imat_dat\":%d,\"process_output\":%s,\"show_statistics\":%s,\"parse_special\":%s,", quoted(p.out_file).c_str(), list(p.in_files).c_str(),
           p.n_out_freq, p.n_save_freq, p.i_chunk, (int) p.imat_dat, p.process_output ? "true" : "false", p.show_statistics ? "true" : "false", p.parse_special ? "true" : "false");
    printf("\"embd_normalize\":%d,\"embd_out\":%s,\"embd_sep\":%s,\"pooling_type\":%d}\n", p.embd_normalize, quoted(p.embd_out).c_str(), quoted(p.embd_sep).c_str(), (int) p.pooling_type);
}

int main(int argc, char ** argv) {
    llama_example ex;
    if (argc < 3 || !example_of(argv[2], ex) || (strcmp(argv[1], "options") != 0 && strcmp(argv[1], "parse") != 0)) {
        fprintf(stderr, "usage: llama-args options|parse completion|cli|server|perplexity|imatrix|embedding [ARG...]\n");
        return 2;
    }
    if (strcmp(argv[1], "options") == 0) {
        print_options(ex);
        return 0;
    }
    // common_params_parse reads argv[0] as the program's name, as main's argv.
    std::vector<char *> args = {argv[0]};
    for (int i = 3; i < argc; i++) args.push_back(argv[i]);
    common_params params;
    if (!common_params_parse((int) args.size(), args.data(), params, ex)) {
        printf("{\"error\":true}\n");
        return 0;
    }
    print_parsed(params);
    return 0;
}
