/* task_load.c — a task's data behind one interface: generated (reverse.c) or read from files
 * through the prepared cache (prepared_cache.c). The tasks know nothing of each other; this
 * file sits above them all. */
#include "s2s/data.h"
#include "s2s/prepared.h"

#include <string.h>

S2sStatus task_load(TaskData *td, const ConfigTask *task, S2sError *err) { return task_load_hooks(td, task, NULL, err); }

S2sStatus task_load_hooks(TaskData *td, const ConfigTask *task, const TaskLoadHooks *hooks, S2sError *err) {
    memset(td, 0, sizeof *td);
    switch (task->type) {
    case TASK_REVERSE: return reverse_make(td, task, err);
    case TASK_TRANSLATE: {
        S2sStatus st = prepared_load(td, task, hooks, err);
        if (st) task_free(td); /* what it had loaded before it failed */
        return st;
    }
    }
    S2S_ASSERT_MSG(false, "task.type %d is none of the config's", (int)task->type);
    return S2S_ERR_CONFIG;
}
