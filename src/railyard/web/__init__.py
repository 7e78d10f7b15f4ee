"""The web dashboard: server-rendered pages served by the control plane (`/ui`).

Above `control` and `sim` (it reads the store through control's use-cases and runs the
simulator for the what-if), so `control` never imports it: `railyard up` mounts its router
(`web.routes.router`) through `create_app(extra_routers=...)`. No build step and no
third-party assets: HTML, a little CSS and vanilla JavaScript, all written here.
"""
