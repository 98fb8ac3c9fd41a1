/*
 * strategy.c -- the strategy registry. See strategy.h.
 * New strategies add one line to the table.
 */
#include "strategy.h"

#include <string.h>

#include "strategy_llm.h"

const kf_strategy *kf_strategy_find(const char *name)
{
    static const kf_strategy *const all[] = { &kf_strategy_tune, &kf_strategy_loop,
                                               &kf_strategy_beam, &kf_strategy_parallel };
    for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    return NULL;
}
