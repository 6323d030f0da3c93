# The warnings we build with, on gcc and clang alike (liburcu's set plus ours).
set(PRD_WARNINGS
  -Wall -Wextra -Werror
  -Wmissing-prototypes -Wstrict-prototypes -Wshadow -Wpointer-arith
  -Wwrite-strings -Wformat=2 -Wno-format-nonliteral -Wundef
  -Wmissing-declarations -Wold-style-definition)
set(PRD_CXX_WARNINGS -Wall -Wextra -Werror -Wshadow)
