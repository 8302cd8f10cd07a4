#version 330 core
// The whole viewport as one quad; the fragment shader reads the avatar texel under each
// pixel by its window coordinates (the texture is the viewport's size).
layout(location = 0) in vec2 a_pos;

void main() {
    gl_Position = vec4(a_pos * 2.0 - 1.0, 0.0, 1.0);
}
