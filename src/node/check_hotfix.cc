#include "node/check_hotfix.h"
