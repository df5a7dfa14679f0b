/* The thread-local error message behind memra_last_error(), and type names for messages. */
#include <stdarg.h>
#include <stdio.h>

#include "cpu-internal.h"

static _Thread_local char last_error[512];

int memra_fail(int status, const char * format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(last_error, sizeof last_error, format, arguments);
    va_end(arguments);
    return status;
}

const char * memra_last_error(void) {
    return last_error;
}

const char * memra_type_name(int type) {
    switch (type) {
        case 0: return "f32";
        case 1: return "f16";
        case 2: return "q4_0";
        case 3: return "q4_1";
        case 6: return "q5_0";
        case 7: return "q5_1";
        case 8: return "q8_0";
        case 9: return "q8_1";
        case 10: return "q2_K";
        case 11: return "q3_K";
        case 12: return "q4_K";
        case 13: return "q5_K";
        case 14: return "q6_K";
        case 15: return "q8_K";
        case 16: return "iq2_xxs";
        case 17: return "iq2_xs";
        case 18: return "iq3_xxs";
        case 19: return "iq1_s";
        case 20: return "iq4_nl";
        case 21: return "iq3_s";
        case 22: return "iq2_s";
        case 23: return "iq4_xs";
        case 24: return "i8";
        case 25: return "i16";
        case 26: return "i32";
        case 27: return "i64";
        case 28: return "f64";
        case 29: return "iq1_m";
        case 30: return "bf16";
        case 34: return "tq1_0";
        case 35: return "tq2_0";
        case 39: return "mxfp4";
        default: {
            static _Thread_local char unknown[32];
            snprintf(unknown, sizeof unknown, "type %d", type);
            return unknown;
        }
    }
}
