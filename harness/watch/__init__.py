"""`mplab watch`: a live page of a campaign, served on loopback, reading the store and never writing it.

    state    open_view, CampaignView: the store read incrementally (records, sessions, the running sample's raw
             output, the meter trace) into what the page shows; progress from harness.campaign.progress
    server   start_watch: starlette + uvicorn, updates pushed as server-sent events (sse-starlette)
    page/    the page: HTML, its script and style; charts drawn by plotly.js from the plotly package
"""

#: Where the page listens by default: it has no authentication. Here, not in ``state``, so that `mplab watch`'s
#: option default costs the command line no import of the store's readers.
LOOPBACK = "127.0.0.1"
