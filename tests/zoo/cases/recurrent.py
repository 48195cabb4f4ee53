"""Zoo cases: recurrent layers and cells."""

from __future__ import annotations

from torch import nn

from .common import case

# ---------------------------------------------------------------- recurrent


@case("recurrent")
def lstm(c):
    return c.mod(nn.LSTM(4, 6)), (c.randn(5, 2, 4),)


@case("recurrent")
def lstm_2layer_bidir_batch_first(c):
    m = c.mod(nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True))
    return m, (c.randn(2, 5, 4), (c.randn(4, 2, 6), c.randn(4, 2, 6)))


@case("recurrent")
def lstm_params(c):
    m = c.mod(nn.LSTM(3, 4))
    return c.with_params(m, c.randn(5, 2, 3))


@case("recurrent")
def lstm_proj(c):
    return c.mod(nn.LSTM(4, 6, proj_size=3)), (c.randn(5, 2, 4),)


@case("recurrent")
def lstm_eval(c):
    return c.mod(nn.LSTM(4, 6), train=False), (c.randn(5, 2, 4),)


@case("recurrent")
def gru(c):
    return c.mod(nn.GRU(4, 6, num_layers=2)), (c.randn(5, 2, 4), c.randn(2, 2, 6))


@case("recurrent")
def gru_params(c):
    return c.with_params(c.mod(nn.GRU(3, 4)), c.randn(5, 2, 3))


@case("recurrent")
def rnn_tanh(c):
    return c.mod(nn.RNN(4, 6)), (c.randn(5, 2, 4),)


@case("recurrent")
def rnn_relu_bidir(c):
    return c.mod(nn.RNN(4, 6, nonlinearity="relu", bidirectional=True)), (
        c.randn(5, 2, 4),
    )


@case("recurrent")
def lstm_packed(c):
    m = c.mod(nn.LSTM(4, 6))

    def f(x):
        p = nn.utils.rnn.pack_padded_sequence(x, [5, 3], enforce_sorted=True)
        out, (h, cc) = m(p)
        return nn.utils.rnn.pad_packed_sequence(out)[0], h, cc

    return f, (c.randn(5, 2, 4),)


@case("recurrent")
def lstm_cell(c):
    return c.mod(nn.LSTMCell(4, 6)), (c.randn(3, 4), (c.randn(3, 6), c.randn(3, 6)))


@case("recurrent")
def gru_cell(c):
    return c.mod(nn.GRUCell(4, 6)), (c.randn(3, 4), c.randn(3, 6))


@case("recurrent")
def rnn_cell(c):
    return c.mod(nn.RNNCell(4, 6)), (c.randn(3, 4),)


@case("recurrent")
def gru_cell_params(c):
    return c.with_params(c.mod(nn.GRUCell(3, 4)), c.randn(2, 3))
