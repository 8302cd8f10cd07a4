#version 330 core
// Chroma-key background. u_avatar holds the avatar in premultiplied alpha over nothing.
//
// Every output pixel is either exactly the key or exactly an avatar colour, never a mix:
// OBS's chroma key (chroma_key_filter_v2) is near binary at our tuning, so a pixel that
// mixes the key in (the avatar's antialiased edge over the key) either goes or stays
// tinted green, and one over the key's complement stays tinted magenta. So a pixel at
// least half covered is the avatar's own colour, opaque; one less covered is the key.
//
// The filter also averages its key distance over a pixel's 3x3 neighbours, so a key
// pixel mostly surrounded by avatar (a one-pixel gap, a notch in a staircase edge) is
// kept, green. A key pixel with at least FILL_NEIGHBOURS covered neighbours is therefore
// given their colour: no more than three neighbours are covered beside a straight edge,
// and 3/9 of the farthest any colour is from the default key (#00ff00 to magenta, 1.05 in
// the filter's CbCr distance: 0.35; from pure blue 0.29) is below its similarity, 0.36
// (app/obs/link.py CHROMA_TUNING), so the key beside a straight edge is keyed out.
uniform sampler2D u_avatar;
uniform vec3 u_key;
out vec4 frag;

const int FILL_NEIGHBOURS = 4;

void main() {
    ivec2 at = ivec2(gl_FragCoord.xy);
    ivec2 last = textureSize(u_avatar, 0) - 1;
    vec4 avatar = texelFetch(u_avatar, at, 0);
    if (avatar.a >= 0.5) {
        frag = vec4(avatar.rgb / avatar.a, 1.0);
        return;
    }
    vec4 around = vec4(0.0);
    int covered = 0;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            if (dx == 0 && dy == 0) continue;
            vec4 near = texelFetch(u_avatar, clamp(at + ivec2(dx, dy), ivec2(0), last), 0);
            if (near.a >= 0.5) {
                around += near;
                ++covered;
            }
        }
    }
    frag = vec4(covered >= FILL_NEIGHBOURS ? around.rgb / around.a : u_key, 1.0);
}
