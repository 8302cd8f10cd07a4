#version 330 core
// Chroma-key background. u_avatar holds the avatar in premultiplied alpha over nothing.
// Where nothing was drawn (alpha 0) the key colour goes; elsewhere the avatar goes over
// the key's complement, so the antialiased outline mixes with a colour as far from the
// key as there is and a keyer finds no half-key pixels to leave as a fringe.
uniform sampler2D u_avatar;
uniform vec3 u_key;
in vec2 v_uv;
out vec4 frag;

void main() {
    vec4 avatar = texture(u_avatar, v_uv);
    vec3 edge = avatar.rgb + (1.0 - avatar.a) * (vec3(1.0) - u_key);
    frag = vec4(avatar.a > 0.0 ? edge : u_key, 1.0);
}
