/* Parameters live in Autocomp's gemmini.h; this name exists for programs that include it. */
#include "../gemmini.h"
