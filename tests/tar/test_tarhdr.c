// SPDX-License-Identifier: GPL-2.0-or-later
/* placeholder, replaced below */
int main(void) { return 0; }
