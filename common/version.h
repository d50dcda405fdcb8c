/* braid's release, in the INFO lines of every library and tool. */
#ifndef BRAID_VERSION_H
#define BRAID_VERSION_H

#define BRAID_VERSION "0.1.0"

#endif
