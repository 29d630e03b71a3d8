/* coordinator/co_tmplcmd.h — `coordinator chat-template`: renders a Jinja chat template file with a
 * message list, exactly as serve would hand it to the tokenizer (for tests and for a person
 * debugging a template). */
#ifndef CO_TMPLCMD_H
#define CO_TMPLCMD_H

/* argv after the command name; returns the process exit status. */
int co_chat_template_main(int argc, char **argv);

#endif
