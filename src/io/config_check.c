/* config_check.c — a config's cross-field rules (config.h): what no single key's range says. */
#include "s2s/config.h"

#include <stdio.h>
#include <string.h>

S2sStatus config_check(const Config *c, S2sError *err) {
    const char *o = c->path[0] ? c->path : "config";
    TrainCorpora corpora;
    if (c->task.type == TASK_TRANSLATE && !config_train_corpora(&c->task, &corpora, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s", o, msg);
    }
    if (c->task.type == TASK_TRANSLATE && config_distills(&c->task)) {
        if (c->task.teacher[0] && c->task.teacher_output[0])
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.teacher and task.teacher_output: the teacher's translations go into "
                            "task.cache_dir; give the teacher's models, or a file of their translations, not both", o);
        if (c->task.teacher[0] && !c->task.cache_dir[0])
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.teacher: the teacher's translations are kept in task.cache_dir, "
                            "which is \"\"", o);
        if (c->task.teacher[0] && c->task.teacher_nbest > c->task.teacher_beam)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.teacher_nbest (%d): the beam's n best are at most its %d "
                            "hypotheses (task.teacher_beam)", o, c->task.teacher_nbest, c->task.teacher_beam);
        int named = 1;
        for (const char *p = c->task.train_prefix; *p; p++) named += *p == ',';
        if (named != 1)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.train_prefix: a teacher translates one training corpus; \"%s\" "
                            "names %d", o, c->task.train_prefix, named);
    }
    if (c->task.min_len > c->task.max_len)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.min_len (%d) must not exceed task.max_len (%d)", o, c->task.min_len,
                        c->task.max_len);
    if (c->task.type == TASK_REVERSE) {
        size_t n = strlen(c->task.alphabet);
        if (n == 0) return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.alphabet: expected at least one character", o);
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)c->task.alphabet[i];
            if (ch < 33 || ch > 126)
                return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.alphabet: expected printable ASCII without spaces", o);
            if (memchr(c->task.alphabet, ch, i))
                return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.alphabet: '%c' appears twice", o, ch);
        }
    }
    if (c->task.subword == SUBWORD_BPE && c->task.bpe_model[0] && !c->task.bpe_joint)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.bpe_model segments both sides with one model; task.bpe_joint false "
                        "asks for a model a side (set it true, or leave task.bpe_model empty)", o);
    if (c->task.subword == SUBWORD_SENTENCEPIECE && !c->task.spm_model[0])
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.subword is sentencepiece: task.spm_model must name the .model file", o);
    if (c->task.bpe_dropout > 0 && c->task.subword != SUBWORD_BPE)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.bpe_dropout: BPE-dropout needs task.subword bpe (it is %s)", o,
                        SUBWORD_NAMES[c->task.subword]);
    if (c->task.type == TASK_REVERSE && c->task.subword != SUBWORD_NONE)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: task.subword: %s is for translation; reversal reads characters", o,
                        SUBWORD_NAMES[c->task.subword]);
    if (c->name[0] == '\0' || strchr(c->name, '/') || strcmp(c->name, ".") == 0 || strcmp(c->name, "..") == 0)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: name: expected a plain run name (no '/'), got \"%s\"", o, c->name);
    return S2S_OK;
}
