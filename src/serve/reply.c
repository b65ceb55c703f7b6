/* reply.c — ./serve's answers: a JSON body (an object, or {"error": message}), a 405 naming
 * the methods a path takes, and the web page (page.html, built in by the Makefile). */
#include "serve_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char SERVE_PAGE[];

/* j as the answer (deleted here), with an Allow header when allow is not NULL. */
static enum MHD_Result send_json_allow(struct MHD_Connection *c, unsigned status, cJSON *j, const char *allow) {
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text) return MHD_NO; /* out of memory: the connection is closed */
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result serve_send_json(struct MHD_Connection *c, unsigned status, cJSON *j) {
    return send_json_allow(c, status, j, NULL);
}

enum MHD_Result serve_send_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", msg);
    return serve_send_json(c, status, j);
}

/* 405 with the methods the path takes */
enum MHD_Result serve_send_405(struct MHD_Connection *c, const char *path, const char *allow) {
    cJSON *j = cJSON_CreateObject();
    char msg[300];
    snprintf(msg, sizeof msg, "%.200s takes %s", path, allow);
    cJSON_AddStringToObject(j, "error", msg);
    return send_json_allow(c, MHD_HTTP_METHOD_NOT_ALLOWED, j, allow);
}

enum MHD_Result serve_send_page(struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(SERVE_PAGE), (void *)SERVE_PAGE, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}
